package dynamodb_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/localaws"
	"github.com/weirstream/weir/sink/deadletter/dynamodb"
	sinkddb "github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// A function that panics on one record quarantines that record into a
// DynamoDB table (here a local dynalite stands in for DynamoDB), an item
// per letter, and the pipeline goes on.
func Example() {
	ctx := context.Background()
	env, err := localaws.Start(ctx, localaws.Options{DynamoDB: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	client := env.DynamoDB() // on AWS: leave Client nil, or set AWS and Endpoint
	if _, err := client.CreateTable(ctx, &ddb.CreateTableInput{
		TableName: aws.String("dead-letters"),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("batch"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("index"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("batch"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("index"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	}); err != nil {
		fmt.Println(err)
		return
	}
	dead, err := dynamodb.New(ctx, sinkddb.Config{Client: client, Table: "dead-letters"})
	if err != nil {
		fmt.Println(err)
		return
	}

	p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	src.Push("1", "2", "x", "4")
	numbers := stream.Map(stream.From(p, src), func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			panic(err)
		}
		return n
	})
	sum := 0 // one shard: ForEach runs one record at a time
	stream.ForEach(numbers, func(_ context.Context, n int) error { sum += n; return nil },
		stream.Retry(0), stream.Quarantine(dead))
	runCtx, cancel := context.WithCancel(ctx)
	cancel() // Run drains at once: what was pushed is processed
	if err := p.Run(runCtx); err != nil {
		fmt.Println(err)
		return
	}

	letters, err := dead.Letters(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range letters {
		fmt.Printf("%s %s-%s +%d: %q: %s\n", l.Range.Shard, l.Range.First, l.Range.Last, l.Offset, l.Record, l.Err)
	}
	fmt.Println("sum:", sum)
	// Output:
	// shardId-000000000000 1-4 +2: "x": panic: strconv.Atoi: parsing "x": invalid syntax
	// sum: 7
}
