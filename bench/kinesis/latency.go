package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// latencies collects put -> output latencies of the records put once the
// consumer is running (it output a probe record): its start is not its
// steady state. Safe for concurrent use.
type latencies struct {
	ready     chan struct{} // closed when the first probe is output
	readyOnce sync.Once

	mu    sync.Mutex
	after time.Time // records put before are left out; zero: all are
	d     []time.Duration
}

func newLatencies() *latencies { return &latencies{ready: make(chan struct{})} }

// probe is the data of a probe record; every other record's data is its
// put time.
var probe = make([]byte, 8)

// record takes the latency of one record.
func (l *latencies) record(data []byte) {
	if len(data) < 8 {
		return
	}
	ns := int64(binary.BigEndian.Uint64(data))
	if ns == 0 {
		l.readyOnce.Do(func() { close(l.ready) })
		return
	}
	d := time.Since(time.Unix(0, ns))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.after.IsZero() || time.Unix(0, ns).Before(l.after) {
		return
	}
	l.d = append(l.d, d)
}

// start starts counting records put from now on.
func (l *latencies) start() {
	l.mu.Lock()
	l.after = time.Now()
	l.mu.Unlock()
}

// awaitReady puts probe records until one is output, or ctx is done.
func awaitReady(ctx context.Context, env *localaws.Env, name string, l *latencies) error {
	client := env.Kinesis()
	for {
		if _, err := client.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("probe"), Data: probe}); err != nil {
			return err
		}
		select {
		case <-l.ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (l *latencies) summary() string {
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return "no records"
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(int(p*float64(len(d))), len(d)-1)].Round(time.Millisecond) }
	return fmt.Sprintf("p50 %v  p99 %v  max %v  (%d records)", q(0.5), q(0.99), d[len(d)-1].Round(time.Millisecond), len(d))
}

// latency measures put -> output latency at a low steady rate.
func latency(ctx context.Context, env *localaws.Env, o options, out io.Writer, logger *slog.Logger) error {
	runs := []struct {
		name    string
		consume func(ctx context.Context, name string, lat *latencies) error
	}{
		{"weir, defaults (1s batches)", func(ctx context.Context, name string, lat *latencies) error {
			return weirLatency(ctx, env, name, 0, 0, lat, logger)
		}},
		{fmt.Sprintf("weir, %v batches", o.batch), func(ctx context.Context, name string, lat *latencies) error {
			return weirLatency(ctx, env, name, o.batch, 0, lat, logger)
		}},
		{fmt.Sprintf("weir, %v batches, %v poll", o.poll/2, o.poll), func(ctx context.Context, name string, lat *latencies) error {
			return weirLatency(ctx, env, name, o.poll/2, o.poll, lat, logger)
		}},
		{fmt.Sprintf("plain loop, a read every %v", o.poll), func(ctx context.Context, name string, lat *latencies) error {
			return plainLatency(ctx, env, name, o.poll, lat)
		}},
	}
	fmt.Fprintf(out, "put -> output latency, %d records/s for %v on %d shards, once the consumer output a first record:\n", o.rate, o.duration, o.shards)
	for _, r := range runs {
		name := "bench-lat-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		if err := env.CreateStream(ctx, name, o.shards); err != nil {
			return err
		}
		lat := newLatencies()
		cctx, cancel := context.WithCancel(ctx)
		g, gctx := errgroup.WithContext(cctx)
		g.Go(func() error { return r.consume(gctx, name, lat) })
		readyCtx, readyCancel := context.WithTimeout(gctx, time.Minute)
		perr := awaitReady(readyCtx, env, name, lat)
		readyCancel()
		if perr == nil {
			lat.start()
			perr = produce(gctx, env, name, o.rate, o.duration)
		}
		// Let the last records through, then stop the consumer.
		select {
		case <-time.After(3 * time.Second):
		case <-gctx.Done():
		}
		cancel()
		if err := g.Wait(); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		if perr != nil && ctx.Err() == nil {
			return fmt.Errorf("producer: %w", perr)
		}
		fmt.Fprintf(out, "  %-40s %s\n", r.name, lat.summary())
	}
	return nil
}

// produce puts rate records/s, each holding its put time, for d.
func produce(ctx context.Context, env *localaws.Env, name string, rate int, d time.Duration) error {
	client := env.Kinesis()
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		data := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
		if _, err := client.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String(strconv.Itoa(i)), Data: data}); err != nil {
			return err
		}
	}
	return nil
}

// weirLatency runs weir with its defaults (leases on, TRIM_HORIZON) and
// the given batch and poll intervals (0: the default) until ctx is done.
func weirLatency(ctx context.Context, env *localaws.Env, name string, batchInterval, poll time.Duration, lat *latencies, logger *slog.Logger) error {
	awsCfg := env.AWSConfig()
	src, err := kinesis.New(kinesis.Config{
		Stream: name, App: name, InitialPosition: kinesis.TrimHorizon, AWS: &awsCfg, Endpoint: env.KinesisEndpoint, Logger: logger,
		PollInterval: poll,
		Leases:       &leasetable.Config{Endpoint: env.DynamoDBEndpoint},
	})
	if err != nil {
		return err
	}
	sc, err := stream.NewPipeline(stream.Config{BatchInterval: batchInterval, Logger: logger})
	if err != nil {
		return err
	}
	stream.ForEachBatch(stream.From(sc, src), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		for r := range b.All() {
			lat.record(r.Data)
		}
		return nil
	})
	go func() { <-ctx.Done(); sc.Stop() }()
	return sc.Run(context.WithoutCancel(ctx))
}

// plainLatency reads every shard with a GetRecords loop that calls every
// poll (200ms: Kinesis's 5 reads/s per shard), as harlow/kinesis-consumer
// does with its PollInterval, until ctx is done.
func plainLatency(ctx context.Context, env *localaws.Env, name string, poll time.Duration, lat *latencies) error {
	client := env.Kinesis()
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
			for iter := it.ShardIterator; iter != nil; {
				start := time.Now()
				out, err := client.GetRecords(gctx, &awskinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
				if err != nil {
					return nil // stopped
				}
				for _, r := range out.Records {
					lat.record(r.Data)
				}
				iter = out.NextShardIterator
				select {
				case <-gctx.Done():
					return nil
				case <-time.After(poll - time.Since(start)):
				}
			}
			return nil
		})
	}
	return g.Wait()
}
