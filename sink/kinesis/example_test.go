package kinesis_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/sink/kinesis"
)

// throttlingKinesis stands in for *awskinesis.Client: it prints each
// PutRecords call and throttles record "b1" the first time.
type throttlingKinesis struct{ calls int }

func (k *throttlingKinesis) PutRecords(_ context.Context, in *awskinesis.PutRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	k.calls++
	fmt.Printf("call %d:", k.calls)
	out := &awskinesis.PutRecordsOutput{}
	for _, r := range in.Records {
		res := types.PutRecordsResultEntry{ShardId: aws.String("shardId-000000000000"), SequenceNumber: aws.String("1")}
		fmt.Printf(" %s", r.Data)
		if string(r.Data) == "b1" && k.calls == 1 {
			res = types.PutRecordsResultEntry{ErrorCode: aws.String("ProvisionedThroughputExceededException")}
			fmt.Print("(throttled)")
		}
		out.Records = append(out.Records, res)
	}
	fmt.Println()
	return out, nil
}

// A call holds at most one record per partition key, so that a record
// that failed ("b1") is written before any later record of its key ("b2"),
// while the records of other keys go on.
func Example() {
	sink, err := kinesis.New(kinesis.Config[string]{
		Client: &throttlingKinesis{}, // awskinesis.NewFromConfig(awsCfg)
		Stream: "events-out",
		// The partition key is the record's first letter.
		Record: func(s string) (string, []byte) { return s[:1], []byte(s) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a pipeline: stream.ForEachBatch(events, sink.Write, stream.Named("kinesis")).
	b := batch.New(1700000000000, nil, []string{"a1", "b1", "a2", "b2", "c1"})
	if err := sink.Write(context.Background(), b); err != nil {
		fmt.Println(err)
	}
	// Output:
	// call 1: a1 b1(throttled) c1
	// call 2: b1 a2
	// call 3: b2
}
