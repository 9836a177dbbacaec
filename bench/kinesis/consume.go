package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// load puts n records of size bytes into the stream, spread over its shards.
func load(ctx context.Context, env *localaws.Env, name string, n, size int) error {
	client := env.Kinesis()
	g, ctx := errgroup.WithContext(ctx)
	const chunk = 5000
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		g.Go(func() error {
			recs := make([][]byte, hi-lo)
			for i := range recs {
				b := make([]byte, size)
				copy(b, strconv.Itoa(lo+i))
				recs[i] = b
			}
			return localaws.PutRecordsOn(ctx, client, name, recs, func(i int) string { return strconv.Itoa(lo + i) })
		})
		if lo/chunk%4 == 3 {
			if err := g.Wait(); err != nil {
				return err
			}
			g, ctx = errgroup.WithContext(context.Background())
		}
	}
	return g.Wait()
}

// consumePlain reads the whole stream with one GetRecords loop per shard,
// the way a hand-written consumer would, and times it until every record was
// read.
func consumePlain(ctx context.Context, env *localaws.Env, name string, o options) (result, error) {
	client := env.Kinesis()
	start := time.Now()
	shards, err := client.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		return result{}, err
	}
	var total atomic.Int64
	var bytes atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	g, gctx := errgroup.WithContext(ctx)
	for _, sh := range shards.Shards {
		g.Go(func() error {
			it, err := client.GetShardIterator(gctx, &awskinesis.GetShardIteratorInput{
				StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				return err
			}
			iter := it.ShardIterator
			for iter != nil {
				out, err := client.GetRecords(gctx, &awskinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
				if err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return err
				}
				var b int64
				for _, r := range out.Records {
					b += int64(len(r.Data))
				}
				bytes.Add(b)
				// Only the read that reaches the total closes done: an empty
				// read afterwards adds nothing and must not close it again.
				if n := int64(len(out.Records)); n > 0 && total.Add(n) == int64(o.records) {
					close(done)
				}
				iter = out.NextShardIterator
				if len(out.Records) == 0 {
					select {
					case <-gctx.Done():
						return nil
					case <-time.After(o.poll):
					}
				}
			}
			return nil
		})
	}
	var elapsed time.Duration
	select {
	case <-done:
		elapsed = time.Since(start)
	case <-gctx.Done():
	}
	cancel()
	if err := g.Wait(); err != nil {
		return result{}, err
	}
	if elapsed == 0 {
		return result{}, fmt.Errorf("plain consumer stopped after %d of %d records", total.Load(), o.records)
	}
	return result{records: int(total.Load()), elapsed: elapsed}, nil
}

// consumeWeir reads the whole stream through a weir pipeline (Kinesis
// receiver with leases and checkpoints -> batches -> an output counting
// records and bytes) and times it until the output has seen every record.
//
// Each run has a fresh lease table, created (empty) before the clock
// starts, as an application's table exists before it runs; the timed part
// includes creating and taking the leases and checkpointing every batch
// interval.
func consumeWeir(ctx context.Context, env *localaws.Env, name string, o options, logger *slog.Logger) (result, error) {
	awsCfg := env.AWSConfig()
	table := "bench-leases-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := createLeaseTable(ctx, env, table); err != nil {
		return result{}, err
	}
	src, err := kinesis.New(kinesis.Config{
		Stream: name, App: "bench", InitialPosition: kinesis.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: o.poll, MinReadInterval: o.minRead, Logger: logger,
		Leases: &kinesis.LeaseConfig{Config: leasetable.Config{TableName: table, DynamoDB: env.DynamoDB()}}, // checkpoints every batch interval
	})
	if err != nil {
		return result{}, err
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: o.batch, BlockInterval: o.block, Logger: logger})
	if err != nil {
		return result{}, err
	}
	var total, bytes int64 // touched only by the output, one batch at a time
	done := make(chan struct{})
	stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		for r := range b.All() {
			bytes += int64(len(r.Data))
		}
		before := total
		total += int64(b.Len())
		if before < int64(o.records) && total >= int64(o.records) {
			close(done)
		}
		return nil
	})
	start := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	select {
	case <-done:
	case err := <-runErr:
		return result{}, fmt.Errorf("pipeline stopped before reading every record: %w", err)
	}
	elapsed := time.Since(start)
	p.Stop()
	if err := <-runErr; err != nil {
		return result{}, err
	}
	if total != int64(o.records) {
		return result{}, fmt.Errorf("weir read %d records, want %d", total, o.records)
	}
	if cs := src.CheckpointStats(); cs.Failures > 0 {
		return result{}, fmt.Errorf("weir: %d checkpoints failed", cs.Failures)
	}
	logger.Debug("bench: weir checkpoints", "commits", src.CheckpointStats().Commits)
	return result{records: int(total), elapsed: elapsed}, nil
}

// createLeaseTable creates an empty lease table and waits until it is
// usable.
func createLeaseTable(ctx context.Context, env *localaws.Env, name string) error {
	t, err := leasetable.NewTable(leasetable.TableConfig{Name: name, Client: env.DynamoDB(), PollInterval: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	if err := t.Ensure(ctx); err != nil {
		return fmt.Errorf("lease table: %w", err)
	}
	return nil
}
