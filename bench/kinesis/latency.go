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
	"sync/atomic"
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
	reads func() int64 // the consumer's GetRecords calls so far; nil: none yet
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

// start starts counting records put from now on, and returns the
// consumer's GetRecords calls so far.
func (l *latencies) start() int64 {
	l.mu.Lock()
	l.after = time.Now()
	l.mu.Unlock()
	return l.calls()
}

// countReads makes reads the consumer's count of its GetRecords calls.
func (l *latencies) countReads(reads func() int64) {
	l.mu.Lock()
	l.reads = reads
	l.mu.Unlock()
}

// calls returns the consumer's GetRecords calls so far.
func (l *latencies) calls() int64 {
	l.mu.Lock()
	reads := l.reads
	l.mu.Unlock()
	if reads == nil {
		return 0
	}
	return reads()
}

// awaitReady puts probe records until each of lats has output one, or
// ctx is done.
func awaitReady(ctx context.Context, env *localaws.Env, name string, lats []*latencies) error {
	client := env.Kinesis()
	for _, l := range lats {
		for ready := false; !ready; {
			if _, err := client.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String("probe"), Data: probe}); err != nil {
				return err
			}
			select {
			case <-l.ready:
				ready = true
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
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

// readInterval is the least time between two GetRecords calls on one
// shard that Kinesis allows (5 reads/s per shard): the plain loop reads
// this often, the fastest any polling consumer may.
const readInterval = 200 * time.Millisecond

// latencyRun is one consumer of a latency run.
type latencyRun struct {
	name    string
	consume func(ctx context.Context, name string, lat *latencies) error
}

// latencyRuns are the consumers a latency run compares, all reading one
// stream at the same time: weir with its defaults; weir in the
// low-latency configuration at one GetRecords call every poll per shard
// (PollInterval poll, poll/5 batches); a model of
// harlow/kinesis-consumer with that poll interval (its ScanShard calls
// GetRecords on a ticker of its scan interval, 250ms by default, and
// hands each record to its function as the call returns); and a plain
// loop reading every readInterval, the most the shard's budget allows.
func latencyRuns(env *localaws.Env, o options, logger *slog.Logger) []latencyRun {
	runs := []latencyRun{
		{"weir, defaults (1s batches, 500ms poll)", func(ctx context.Context, name string, lat *latencies) error {
			return weirLatency(ctx, env, name, name+"-defaults", weirTiming{}, lat, logger)
		}},
		{fmt.Sprintf("weir, low latency (%v batches, %v poll)", lowLatency(o.poll).batch, o.poll), func(ctx context.Context, name string, lat *latencies) error {
			return weirLatency(ctx, env, name, name+"-low", lowLatency(o.poll), lat, logger)
		}},
		{fmt.Sprintf("harlow model (a read every %v)", o.poll), func(ctx context.Context, name string, lat *latencies) error {
			return plainLatency(ctx, env, name, o.poll, lat)
		}},
	}
	if o.poll != readInterval {
		runs = append(runs, latencyRun{fmt.Sprintf("plain loop (a read every %v)", readInterval), func(ctx context.Context, name string, lat *latencies) error {
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
	name := "bench-lat-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := env.CreateStream(ctx, name, o.shards); err != nil {
		return err
	}
	runs := latencyRuns(env, o, logger)
	lats := make([]*latencies, len(runs))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(cctx)
	for i, r := range runs {
		lats[i] = newLatencies()
		g.Go(func() error {
			if err := r.consume(gctx, name, lats[i]); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			return nil
		})
	}
	readyCtx, readyCancel := context.WithTimeout(gctx, time.Minute)
	perr := awaitReady(readyCtx, env, name, lats)
	readyCancel()
	reads := make([]float64, len(runs))
	if perr == nil {
		calls := make([]int64, len(runs))
		start := time.Now()
		for i, l := range lats {
			calls[i] = l.start()
		}
		perr = produce(gctx, env, name, o.rate, o.duration)
		for i, l := range lats {
			reads[i] = float64(l.calls()-calls[i]) / time.Since(start).Seconds() / float64(o.shards)
		}
	}
	// Let the last records through, then stop the consumers.
	select {
	case <-time.After(3 * time.Second):
	case <-gctx.Done():
	}
	cancel()
	if err := g.Wait(); err != nil {
		return err
	}
	if perr != nil && ctx.Err() == nil {
		return fmt.Errorf("producer: %w", perr)
	}
	fmt.Fprintf(out, "put -> output latency, %d records/s for %v on %d shards, the consumers reading at once, from when each output a first record:\n", o.rate, o.duration, o.shards)
	for i, r := range runs {
		fmt.Fprintf(out, "  %-46s %s, %.2f reads/s per shard\n", r.name, lats[i].summary(), reads[i])
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

// weirTiming is weir's timing in a latency run; zero fields take their
// defaults.
type weirTiming struct {
	batch, poll, minRead time.Duration
}

// lowLatency is README's low-latency configuration at one GetRecords call
// every poll per shard: a read at the tip every poll (PollInterval), each
// timed to end just before a batch is cut, and five batches per read, so
// that a read that ends late, or a reader that wakes late and takes the
// next batch's slot, costs a fifth of a poll. MinReadInterval keeps its
// default (200ms, the shard's 5 reads/s), below poll: the slack lets a read
// that started late keep its phase.
func lowLatency(poll time.Duration) weirTiming {
	return weirTiming{batch: poll / 5, poll: poll}
}

// weirLatency runs weir as application app (its own lease table), with
// its defaults (leases on, TRIM_HORIZON) and the given timing, until ctx
// is done.
func weirLatency(ctx context.Context, env *localaws.Env, name, app string, t weirTiming, lat *latencies, logger *slog.Logger) error {
	awsCfg := env.AWSConfig()
	src, err := kinesis.New(kinesis.Config{
		Stream: name, App: app, InitialPosition: kinesis.TrimHorizon, AWS: &awsCfg, Endpoint: env.KinesisEndpoint, Logger: logger,
		PollInterval: t.poll, MinReadInterval: t.minRead,
		Leases: &leasetable.Config{Endpoint: env.DynamoDBEndpoint},
	})
	if err != nil {
		return err
	}
	lat.countReads(func() int64 {
		var n int64
		for _, sh := range src.Stats().Shards {
			for _, c := range sh.GetRecordsLatency {
				n += c
			}
		}
		return n
	})
	sc, err := stream.NewPipeline(stream.Config{BatchInterval: t.batch, Logger: logger})
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
// poll, as harlow/kinesis-consumer does on the ticker of its scan
// interval, until ctx is done.
func plainLatency(ctx context.Context, env *localaws.Env, name string, poll time.Duration, lat *latencies) error {
	client := env.Kinesis()
	var reads atomic.Int64
	lat.countReads(reads.Load)
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
					lat.record(r.Data)
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
