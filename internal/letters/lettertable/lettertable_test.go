package lettertable

import (
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/stream"
)

// TestAttrsNameEveryItemAttribute checks that Attrs, which New of
// sink/deadletter/dynamodb refuses as a version attribute, names every
// attribute Item writes besides the key: a field added to DeadLetter and
// to Item but not to Attrs would let a version attribute of that name
// through.
func TestAttrsNameEveryItemAttribute(t *testing.T) {
	l := stream.DeadLetter{Time: batch.Time(1), Output: 2, OutputName: "out", Index: 3,
		Range:  batch.SeqRange{Stream: "s", Shard: "shardId-0", First: "1", Last: "2", Count: 2},
		Offset: 1, Record: []byte("r"), Encoding: "json", Err: "e", Panic: "p", Stack: "st"}
	// Every field set: Item leaves out only the empty ones.
	v := reflect.ValueOf(l)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("DeadLetter.%s is not set in the test's letter: set it", v.Type().Field(i).Name)
		}
	}
	key := map[string]types.AttributeValue{HashKey: &types.AttributeValueMemberS{Value: "k"}, RangeKey: num(0)}
	for name := range Item(l, key) {
		if name == HashKey || name == RangeKey {
			continue
		}
		if !slices.Contains(Attrs(), name) {
			t.Errorf("Item writes the attribute %q, which Attrs does not name", name)
		}
	}
}
