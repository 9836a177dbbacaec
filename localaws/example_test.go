package localaws_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/localaws"
	weirkinesis "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
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

// A weir pipeline reads a stream on the local servers as it would on AWS:
// give the Kinesis receiver the Env's configuration and endpoints, here with
// its leases and checkpoints in the local DynamoDB.
func Example_pipeline() {
	ctx := context.Background()
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	if err := env.CreateStream(ctx, "words", 1); err != nil {
		fmt.Println(err)
		return
	}
	if err := env.PutRecords(ctx, "words", [][]byte{[]byte("hello"), []byte("local"), []byte("world")}, nil); err != nil {
		fmt.Println(err)
		return
	}

	cfg := env.AWSConfig() // region us-east-1, static credentials
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err := weirkinesis.New(weirkinesis.Config{
		Stream: "words", App: "example", AWS: &cfg,
		InitialPosition: weirkinesis.TrimHorizon,
		Logger:          logger,
		Endpoint:        env.KinesisEndpoint,
		Leases:          &leasetable.Config{Endpoint: env.DynamoDBEndpoint},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, Logger: logger})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	seen := 0
	stream.ForEach(stream.From(p, src), func(_ context.Context, r weirkinesis.Record) error {
		fmt.Println(string(r.Data))
		if seen++; seen == 3 {
			stop() // drains: the pipeline finishes the batch and checkpoints
		}
		return nil
	})
	if err := p.Run(runCtx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// hello
	// local
	// world
}
