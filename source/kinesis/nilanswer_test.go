package kinesis

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
)

// nilGetRecords is a client wrapper with a bug: GetRecords answers with
// neither an output nor an error.
type nilGetRecords struct{ *kinesistest.Fake }

func (nilGetRecords) GetRecords(context.Context, *awskinesis.GetRecordsInput, ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	return nil, nil
}

// TestClientNilAnswerFailsStart gives the receiver a client whose
// GetRecords returns (nil, nil). Before, the reader dereferenced the nil
// output in its own goroutine and the process crashed (found by review);
// now Start fails with an error naming the client's answer.
func TestClientNilAnswerFailsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := kinesistest.New()
		if err := fake.CreateStream("s", 1); err != nil {
			t.Fatal(err)
		}
		r, err := New(Config{Stream: "s", App: "a", Client: nilGetRecords{fake}})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Start(t.Context(), source.Runtime[Record]{Push: newCollector(0).push})
		if err == nil || !strings.Contains(err.Error(), "answered with no output and no error") {
			t.Fatalf("Start = %v, want the client's empty answer named", err)
		}
	})
}
