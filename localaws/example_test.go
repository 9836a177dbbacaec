package localaws_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/weirstream/weir/internal/localaws"
)

// Example starts kinesalite, puts a record and reads it back.
func Example() {
	ctx := context.Background()
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()

	if err := env.CreateStream(ctx, "greetings", 1); err != nil {
		fmt.Println(err)
		return
	}
	if err := env.PutRecords(ctx, "greetings", [][]byte{[]byte("hello"), []byte("world")}, nil); err != nil {
		fmt.Println(err)
		return
	}
	kc := env.Kinesis()
	it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName:        aws.String("greetings"),
		ShardId:           aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range out.Records {
		fmt.Println(string(r.Data))
	}
	// Output:
	// hello
	// world
}
