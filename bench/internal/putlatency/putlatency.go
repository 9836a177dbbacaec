// Package putlatency measures put -> output latency of consumers reading one
// Kinesis stream at once, for weir's benchmarks: bench/kinesis (weir, a
// model of harlow/kinesis-consumer, a plain loop) and bench/harlow (the
// real harlow, a module of its own).
package putlatency

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
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/localaws"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// Consumer is one consumer of a run.
type Consumer struct {
	// Name labels the consumer's line of output.
	Name string
	// Consume reads stream until ctx is done, passing each record's data
	// to lat.Record.
	Consume func(ctx context.Context, stream string, lat *Latencies) error
}

// Latencies collects put -> output latencies of the records put once the
// consumer is running (it output a probe record): its start is not its
// steady state. Safe for concurrent use.
type Latencies struct {
	ready     chan struct{} // closed when the first probe is output
	readyOnce sync.Once

	mu    sync.Mutex
	after time.Time // records put before are left out; zero: all are
	d     []time.Duration
	reads func() int64 // the consumer's GetRecords calls so far; nil: none yet
}

// probe is the data of a probe record; every other record's data is its
// put time.
var probe = make([]byte, 8)

// Record takes the latency of the record whose data is data.
func (l *Latencies) Record(data []byte) {
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

// CountReads makes reads the consumer's count of its GetRecords calls.
func (l *Latencies) CountReads(reads func() int64) {
	l.mu.Lock()
	l.reads = reads
	l.mu.Unlock()
}

// start starts counting records put from now on, and returns the
// consumer's GetRecords calls so far.
func (l *Latencies) start() int64 {
	l.mu.Lock()
	l.after = time.Now()
	l.mu.Unlock()
	return l.calls()
}

// calls returns the consumer's GetRecords calls so far.
func (l *Latencies) calls() int64 {
	l.mu.Lock()
	reads := l.reads
	l.mu.Unlock()
	if reads == nil {
		return 0
	}
	return reads()
}

// count returns the number of latencies taken.
func (l *Latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// summary returns the latencies' quantiles, and how many of the put
// records were never output.
func (l *Latencies) summary(put int) string {
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return "no records"
	}
	missing := ""
	if len(d) < put {
		missing = fmt.Sprintf(", %d of %d put never output", put-len(d), put)
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(int(p*float64(len(d))), len(d)-1)].Round(time.Millisecond) }
	return fmt.Sprintf("p50 %v  p99 %v  max %v  (%d records%s)", q(0.5), q(0.99), d[len(d)-1].Round(time.Millisecond), len(d), missing)
}

// Run creates a stream of shards shards, runs consumers on it at once
// (the same records, and the same load on a shared machine), puts rate
// records/s for d once each has output a probe record, and writes each
// one's p50, p99, max and GetRecords calls per second per shard to out.
func Run(ctx context.Context, env *localaws.Env, consumers []Consumer, rate int, d time.Duration, shards int, out io.Writer) error {
	name := "bench-lat-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := env.CreateStream(ctx, name, shards); err != nil {
		return err
	}
	lats := make([]*Latencies, len(consumers))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(cctx)
	for i, c := range consumers {
		lats[i] = &Latencies{ready: make(chan struct{})}
		g.Go(func() error {
			if err := c.Consume(gctx, name, lats[i]); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
			return nil
		})
	}
	readyCtx, readyCancel := context.WithTimeout(gctx, time.Minute)
	perr := awaitReady(readyCtx, env, name, lats)
	readyCancel()
	reads := make([]float64, len(consumers))
	put := 0
	if perr == nil {
		calls := make([]int64, len(consumers))
		start := time.Now()
		for i, l := range lats {
			calls[i] = l.start()
		}
		put, perr = produce(gctx, env, name, rate, d)
		for i, l := range lats {
			reads[i] = float64(l.calls()-calls[i]) / time.Since(start).Seconds() / float64(shards)
		}
	}
	// Wait for the last records (at most 30 s: a record still missing
	// then is reported so), then stop the consumers.
	deadline := time.Now().Add(30 * time.Second)
	for _, l := range lats {
		for l.count() < put && time.Now().Before(deadline) && gctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	cancel()
	if err := g.Wait(); err != nil {
		return err
	}
	if perr != nil && ctx.Err() == nil {
		return fmt.Errorf("producer: %w", perr)
	}
	fmt.Fprintf(out, "put -> output latency, %d records/s for %v on %d shards, the consumers reading at once, from when each output a first record:\n", rate, d, shards)
	for i, c := range consumers {
		fmt.Fprintf(out, "  %-46s %s, %.2f reads/s per shard\n", c.Name, lats[i].summary(put), reads[i])
	}
	return nil
}

// awaitReady puts probe records until each of lats has output one, or
// ctx is done.
func awaitReady(ctx context.Context, env *localaws.Env, name string, lats []*Latencies) error {
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

// produce puts rate records/s, each holding its put time, for d.
func produce(ctx context.Context, env *localaws.Env, name string, rate int, d time.Duration) (int, error) {
	client := env.Kinesis()
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	end := time.Now().Add(d)
	i := 0
	for ; time.Now().Before(end); i++ {
		select {
		case <-ctx.Done():
			return i, ctx.Err()
		case <-t.C:
		}
		data := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
		if _, err := client.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String(strconv.Itoa(i)), Data: data}); err != nil {
			return i, err
		}
	}
	return i, nil
}

// Timing is weir's timing in a latency run; zero fields take their
// defaults.
type Timing struct {
	Batch, Poll, MinRead time.Duration
}

// Weir runs weir on stream name as application app (its own lease table), with
// its defaults (leases on, TRIM_HORIZON) and the given timing, until ctx
// is done.
func Weir(ctx context.Context, env *localaws.Env, name, app string, t Timing, lat *Latencies, logger *slog.Logger) error {
	awsCfg := env.AWSConfig()
	src, err := kinesis.New(kinesis.Config{
		Stream: name, App: app, InitialPosition: kinesis.TrimHorizon, AWS: &awsCfg, Endpoint: env.KinesisEndpoint, Logger: logger,
		PollInterval: t.Poll, MinReadInterval: t.MinRead,
		Leases: &leasetable.Config{Endpoint: env.DynamoDBEndpoint},
	})
	if err != nil {
		return err
	}
	lat.CountReads(func() int64 {
		var n int64
		for _, sh := range src.Stats().Shards {
			for _, c := range sh.GetRecordsLatency {
				n += c
			}
		}
		return n
	})
	sc, err := stream.NewPipeline(stream.Config{BatchInterval: t.Batch, Logger: logger})
	if err != nil {
		return err
	}
	stream.ForEachBatch(stream.From(sc, src), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		for r := range b.All() {
			lat.Record(r.Data)
		}
		return nil
	})
	go func() { <-ctx.Done(); sc.Stop() }()
	return sc.Run(context.WithoutCancel(ctx))
}
