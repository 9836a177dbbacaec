package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/bench/internal/putlatency"
	"github.com/weirstream/weir/internal/localaws"
)

// readInterval is the least time between two GetRecords calls on one
// shard that Kinesis allows (5 reads/s per shard): the plain loop reads
// this often, the fastest any polling consumer may.
const readInterval = 200 * time.Millisecond

// latencyRuns are the consumers a latency run compares, all reading one
// stream at the same time: weir with its defaults; weir in the
// low-latency configuration at one GetRecords call every poll per shard
// (PollInterval poll, poll/5 batches); a model of
// harlow/kinesis-consumer with that poll interval (its ScanShard calls
// GetRecords on a ticker of its scan interval, 250ms by default, and
// hands each record to its function as the call returns); and a plain
// loop reading every readInterval, the most the shard's budget allows.
func latencyRuns(env *localaws.Env, o options, logger *slog.Logger) []putlatency.Consumer {
	runs := []putlatency.Consumer{
		{Name: "weir, defaults (1s batches, 500ms poll)", Consume: func(ctx context.Context, name string, lat *putlatency.Latencies) error {
			return putlatency.Weir(ctx, env, name, name+"-defaults", putlatency.Timing{}, lat, logger)
		}},
		{Name: fmt.Sprintf("weir, low latency (%v batches, %v poll)", lowLatency(o.poll).Batch, o.poll), Consume: func(ctx context.Context, name string, lat *putlatency.Latencies) error {
			return putlatency.Weir(ctx, env, name, name+"-low", lowLatency(o.poll), lat, logger)
		}},
		{Name: fmt.Sprintf("harlow model (a read every %v)", o.poll), Consume: func(ctx context.Context, name string, lat *putlatency.Latencies) error {
			return plainLatency(ctx, env, name, o.poll, lat)
		}},
	}
	if o.poll != readInterval {
		runs = append(runs, putlatency.Consumer{Name: fmt.Sprintf("plain loop (a read every %v)", readInterval), Consume: func(ctx context.Context, name string, lat *putlatency.Latencies) error {
			return plainLatency(ctx, env, name, readInterval, lat)
		}})
	}
	return runs
}

// latency measures put -> output latency at a low steady rate, of every
// consumer of latencyRuns reading the same stream at the same time: the
// same records, and the same load on a shared machine.
func latency(ctx context.Context, env *localaws.Env, o options, out io.Writer, logger *slog.Logger) error {
	if o.poll < readInterval {
		return fmt.Errorf("-poll %v: must be >= %v in latency mode (Kinesis allows 5 GetRecords calls per second per shard)", o.poll, readInterval)
	}
	return putlatency.Run(ctx, env, latencyRuns(env, o, logger), o.rate, o.duration, o.shards, out)
}

// lowLatency is README's low-latency configuration at one GetRecords call
// every poll per shard: a read at the tip every poll (PollInterval), each
// timed to end just before a batch is cut, and five batches per read, so
// that a read that ends late, or a reader that wakes late and takes the
// next batch's slot, costs a fifth of a poll. MinReadInterval keeps its
// default (200ms, the shard's 5 reads/s), below poll: the slack lets a read
// that started late keep its phase.
func lowLatency(poll time.Duration) putlatency.Timing {
	return putlatency.Timing{Batch: poll / 5, Poll: poll}
}

// plainLatency reads every shard with a GetRecords loop that calls every
// poll, as harlow/kinesis-consumer does on the ticker of its scan
// interval, until ctx is done.
func plainLatency(ctx context.Context, env *localaws.Env, name string, poll time.Duration, lat *putlatency.Latencies) error {
	client := env.Kinesis()
	var reads atomic.Int64
	lat.CountReads(reads.Load)
	shards, err := client.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, sh := range shards.Shards {
		g.Go(func() error {
			it, err := client.GetShardIterator(gctx, &awskinesis.GetShardIteratorInput{
				StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				return err
			}
			tick := time.NewTicker(poll)
			defer tick.Stop()
			for iter := it.ShardIterator; iter != nil; {
				reads.Add(1)
				out, err := client.GetRecords(gctx, &awskinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
				if err != nil {
					return nil // stopped
				}
				for _, r := range out.Records {
					lat.Record(r.Data)
				}
				iter = out.NextShardIterator
				select {
				case <-gctx.Done():
					return nil
				case <-tick.C:
				}
			}
			return nil
		})
	}
	return g.Wait()
}
