package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// runChild is the worker: weir's defaults, a directory recovery log, and
// one line per batch and shard with records: "batch <shard> <newest put
// time>".
func runChild(ctx context.Context, o options, out io.Writer) error {
	awsCfg := (&localaws.Env{}).AWSConfig()
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	src, err := kinesis.New(kinesis.Config{
		Stream: o.stream, App: "restart", AWS: &awsCfg, Endpoint: o.kinesisEndpoint,
		Logger: logger,
		Leases: &leasetable.Config{TableName: o.table, Endpoint: o.dynamoEndpoint, StateDir: o.stateDir},
	})
	if err != nil {
		return err
	}
	p, err := stream.NewPipeline(stream.Config{Recovery: recovery.Dir(o.recoveryDir), Logger: logger})
	if err != nil {
		return err
	}
	stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		newest := map[string]int64{}
		for _, r := range b.Records() {
			if n, err := strconv.ParseInt(string(r.Data), 10, 64); err == nil && n > newest[r.ShardID] {
				newest[r.ShardID] = n
			}
		}
		for shard, n := range newest {
			fmt.Fprintf(out, "batch %s %d\n", shard, n)
		}
		return nil
	})
	return p.Run(ctx)
}
