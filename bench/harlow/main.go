// Command harlow measures put -> output latency of the real
// harlow/kinesis-consumer (v0.3.6, its default 250ms scan interval) side by
// side with weir's low-latency configuration (50ms batches, 250ms
// PollInterval: the same GetRecords rate) and weir's defaults, all three
// reading one 4-shard kinesalite stream at once. A producer puts -rate
// records/s for -duration, each carrying its put time. p50, p99, max and
// each consumer's GetRecords calls per second per shard are printed.
//
// It is a module of its own, so that weir's go.mod never lists harlow and
// its dependencies; users of weir never download them. From the repository
// root (WEIR_LOCALAWS_DIR names a folder where the local servers are
// installed, if not the checkout itself):
//
//	cd bench/harlow && go run . -duration 30s
//
// bench/kinesis -mode latency -poll 250ms compares the same weir
// configurations with a model of harlow (a GetRecords loop on a ticker).
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	consumer "github.com/harlow/kinesis-consumer"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/localaws"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
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

// consumerRun is one consumer of the run, and what it measured.
type consumerRun struct {
	name    string
	consume func(ctx context.Context, c *consumerRun) error

	reads atomic.Int64 // GetRecords calls (harlow's, counted by its client)
	calls func() int64 // GetRecords calls so far; nil: reads

	ready     chan struct{} // closed when the first probe is output
	readyOnce sync.Once
	mu        sync.Mutex
	after     time.Time // records put before are left out; zero: all
	d         []time.Duration
	rps       float64 // GetRecords calls per second per shard while records were put
}

// record takes the latency of a record whose data is its put time (zero: a probe).
func (c *consumerRun) record(data []byte) {
	if len(data) < 8 {
		return
	}
	put := time.Unix(0, int64(binary.BigEndian.Uint64(data)))
	if put.UnixNano() == 0 {
		c.readyOnce.Do(func() { close(c.ready) })
		return
	}
	d := time.Since(put)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.after.IsZero() && !put.Before(c.after) {
		c.d = append(c.d, d)
	}
}

// readCount returns the consumer's GetRecords calls so far.
func (c *consumerRun) readCount() int64 {
	if c.calls != nil {
		return c.calls()
	}
	return c.reads.Load()
}

func (c *consumerRun) summary() string {
	c.mu.Lock()
	d := slices.Clone(c.d)
	c.mu.Unlock()
	if len(d) == 0 {
		return "no records"
	}
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(int(p*float64(len(d))), len(d)-1)].Round(time.Millisecond) }
	return fmt.Sprintf("p50 %v  p99 %v  max %v  (%d records)", q(0.5), q(0.99), d[len(d)-1].Round(time.Millisecond), len(d))
}

func run(ctx context.Context, rate int, duration time.Duration, shards int) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true, Logger: logger})
	if err != nil {
		return err
	}
	defer env.Close()
	name := "bench-harlow-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := env.CreateStream(ctx, name, shards); err != nil {
		return err
	}
	runs := []*consumerRun{
		{name: "harlow v0.3.6 (default 250ms scan interval)", consume: func(ctx context.Context, c *consumerRun) error {
			return harlow(ctx, env, name, c)
		}},
		{name: "weir, low latency (50ms batches, 250ms poll)", consume: func(ctx context.Context, c *consumerRun) error {
			return weir(ctx, env, name, "low", 50*time.Millisecond, 250*time.Millisecond, c, logger)
		}},
		{name: "weir, defaults (1s batches, 500ms poll)", consume: func(ctx context.Context, c *consumerRun) error {
			return weir(ctx, env, name, "defaults", 0, 0, c, logger)
		}},
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, c := range runs {
		c.ready = make(chan struct{})
		wg.Go(func() {
			if err := c.consume(cctx, c); err != nil && cctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", c.name, err))
			}
		})
	}
	err = measure(cctx, env, name, rate, duration, shards, runs)
	cancel(nil)
	wg.Wait()
	if cause := context.Cause(cctx); cause != context.Canceled {
		return cause
	}
	if err != nil {
		return err
	}
	fmt.Printf("put -> output latency, %d records/s for %v on %d shards, the consumers reading at once:\n", rate, duration, shards)
	for _, c := range runs {
		fmt.Printf("  %-46s %s, %.2f reads/s per shard\n", c.name, c.summary(), c.rps)
	}
	return nil
}

// measure puts probe records until every consumer has output one, then
// puts rate records/s for duration, counting each consumer's reads, and
// waits a few seconds for the last records.
func measure(ctx context.Context, env *localaws.Env, name string, rate int, duration time.Duration, shards int, runs []*consumerRun) error {
	client := env.Kinesis()
	put := func(key string, at time.Time) error {
		data := make([]byte, 8)
		if !at.IsZero() {
			binary.BigEndian.PutUint64(data, uint64(at.UnixNano()))
		}
		_, err := client.PutRecord(ctx, &awskinesis.PutRecordInput{StreamName: aws.String(name), PartitionKey: aws.String(key), Data: data})
		return err
	}
	for _, c := range runs {
		for ready := false; !ready; {
			if err := put("probe", time.Time{}); err != nil {
				return err
			}
			select {
			case <-c.ready:
				ready = true
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	start := time.Now()
	calls := make([]int64, len(runs))
	for i, c := range runs {
		c.mu.Lock()
		c.after = start
		c.mu.Unlock()
		calls[i] = c.readCount()
	}
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for i := 0; time.Since(start) < duration; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := put(strconv.Itoa(i), time.Now()); err != nil {
			return err
		}
	}
	for i, c := range runs {
		c.rps = float64(c.readCount()-calls[i]) / time.Since(start).Seconds() / float64(shards)
	}
	select {
	case <-time.After(3 * time.Second):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
func harlow(ctx context.Context, env *localaws.Env, name string, c *consumerRun) error {
	h, err := consumer.New(name,
		consumer.WithClient(countingClient{env.Kinesis(), &c.reads}),
		consumer.WithShardIteratorType("TRIM_HORIZON"))
	if err != nil {
		return err
	}
	return h.Scan(ctx, func(r *consumer.Record) error {
		c.record(r.Data)
		return nil
	})
}

// weir runs weir as application app (leases on, TRIM_HORIZON) with the
// given batch and poll intervals (zero: the defaults) until ctx is done.
func weir(ctx context.Context, env *localaws.Env, name, app string, batchInterval, poll time.Duration, c *consumerRun, logger *slog.Logger) error {
	awsCfg := env.AWSConfig()
	src, err := kinesis.New(kinesis.Config{
		Stream: name, App: name + "-" + app, InitialPosition: kinesis.TrimHorizon, AWS: &awsCfg,
		Endpoint: env.KinesisEndpoint, Logger: logger, PollInterval: poll,
		Leases: &leasetable.Config{Endpoint: env.DynamoDBEndpoint},
	})
	if err != nil {
		return err
	}
	c.calls = func() int64 {
		var n int64
		for _, sh := range src.Stats().Shards {
			for _, k := range sh.GetRecordsLatency {
				n += k
			}
		}
		return n
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: batchInterval, Logger: logger})
	if err != nil {
		return err
	}
	stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[kinesis.Record]) error {
		for r := range b.All() {
			c.record(r.Data)
		}
		return nil
	})
	go func() { <-ctx.Done(); p.Stop() }()
	return p.Run(context.WithoutCancel(ctx))
}
