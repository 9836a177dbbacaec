// Command harlow measures put -> output latency of the real
// harlow/kinesis-consumer (v0.3.6, its default 250ms scan interval) side by
// side with weir's low-latency configuration (50ms batches, 250ms
// PollInterval: the same GetRecords rate) and weir's defaults, all three
// reading one kinesalite stream at once. A producer puts -rate records/s
// for -duration, each carrying its put time. p50, p99, max and each
// consumer's GetRecords calls per second per shard are printed.
//
// It is a module of its own, so that weir's go.mod never lists harlow and
// its dependencies: users of weir never download them. Run it from this
// folder (WEIR_LOCALAWS_DIR names a folder where the local servers are
// installed, if not the checkout itself):
//
//	go run . -duration 30s
//
// bench/kinesis -mode latency -poll 250ms compares the same weir
// configurations with a model of harlow (a GetRecords loop on a ticker).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	consumer "github.com/harlow/kinesis-consumer"

	"github.com/weirstream/weir/bench/internal/putlatency"
	"github.com/weirstream/weir/localaws"
)

func main() {
	rate := flag.Int("rate", 100, "records put per second")
	duration := flag.Duration("duration", 30*time.Second, "how long to put records")
	shards := flag.Int("shards", 4, "shards of the stream")
	flag.Parse()
	if *rate < 1 || *duration <= 0 || *shards < 1 {
		fmt.Fprintln(os.Stderr, "harlow: -rate, -duration and -shards must be > 0")
		os.Exit(2)
	}
	if err := run(context.Background(), *rate, *duration, *shards); err != nil {
		fmt.Fprintln(os.Stderr, "harlow:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rate int, duration time.Duration, shards int) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true, Logger: logger})
	if err != nil {
		return err
	}
	defer env.Close()
	weir := func(app string, t putlatency.Timing) func(context.Context, string, *putlatency.Latencies) error {
		return func(ctx context.Context, name string, lat *putlatency.Latencies) error {
			return putlatency.Weir(ctx, env, name, name+"-"+app, t, lat, logger)
		}
	}
	return putlatency.Run(ctx, env, []putlatency.Consumer{
		{Name: "harlow v0.3.6 (default 250ms scan interval)", Consume: func(ctx context.Context, name string, lat *putlatency.Latencies) error {
			return harlow(ctx, env, name, lat)
		}},
		{Name: "weir, low latency (50ms batches, 250ms poll)", Consume: weir("low", putlatency.Timing{Batch: 50 * time.Millisecond, Poll: 250 * time.Millisecond})},
		{Name: "weir, defaults (1s batches, 500ms poll)", Consume: weir("defaults", putlatency.Timing{})},
	}, rate, duration, shards, os.Stdout)
}

// countingClient is harlow's Kinesis client, counting its GetRecords calls.
type countingClient struct {
	*awskinesis.Client
	reads *atomic.Int64
}

func (c countingClient) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	c.reads.Add(1)
	return c.Client.GetRecords(ctx, in, optFns...)
}

// harlow runs harlow/kinesis-consumer on the stream from TRIM_HORIZON with
// its defaults (250ms scan interval, a no-op checkpoint store) until ctx is
// done.
func harlow(ctx context.Context, env *localaws.Env, name string, lat *putlatency.Latencies) error {
	var reads atomic.Int64
	lat.CountReads(reads.Load)
	h, err := consumer.New(name,
		consumer.WithClient(countingClient{env.Kinesis(), &reads}),
		consumer.WithShardIteratorType("TRIM_HORIZON"))
	if err != nil {
		return err
	}
	return h.Scan(ctx, func(r *consumer.Record) error {
		lat.Record(r.Data)
		return nil
	})
}
