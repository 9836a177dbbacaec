package dynamochunk

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/clock"
)

// throttledDB is a DynamoDB whose table leaves every write of a
// BatchWriteItem unprocessed, as one over its write capacity does
// (dynalite never does: the calls themselves are tested against it).
type throttledDB struct{ calls int }

func (d *throttledDB) BatchWriteItem(_ context.Context, in *dynamodb.BatchWriteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	d.calls++
	return &dynamodb.BatchWriteItemOutput{UnprocessedItems: in.RequestItems}, nil
}

// TestBatchWriteUnprocessedNamesFix checks, in virtual time, that writes
// DynamoDB leaves unprocessed attempt after attempt fail BatchWrite with
// an error naming the table, the cause (its write capacity) and the fix.
func TestBatchWriteUnprocessedNamesFix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := &throttledDB{}
		reqs := []types.WriteRequest{{DeleteRequest: &types.DeleteRequest{Key: map[string]types.AttributeValue{
			"log": &types.AttributeValueMemberS{Value: "l"}, "seq": &types.AttributeValueMemberN{Value: "1"}}}}}
		err := BatchWrite(t.Context(), db, clock.Real{}, "logs", reqs)
		if err == nil {
			t.Fatal("BatchWrite of writes always left unprocessed succeeded")
		}
		for _, want := range []string{"logs", "write capacity", "fix:", string(types.BillingModePayPerRequest)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("BatchWrite: %v; want it to name %q", err, want)
			}
		}
		if db.calls != 9 {
			t.Errorf("%d BatchWriteItem calls, want 9", db.calls)
		}
	})
}
