package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// envChild, when set in the environment, makes the program a consumer
// child: it holds the JSON of a childParams. Each consumer run is a
// process of its own, so that its time includes what a user's process
// pays from its start: the runtime, loading the AWS configuration,
// clients and connections, and, for weir, creating the lease table and
// taking the leases.
const envChild = "WEIR_BENCH_CHILD"

// childParams tells a child what to consume and how.
type childParams struct {
	Consumer         string // "plain" or "weir"
	Stream           string
	Records          int
	KinesisEndpoint  string
	DynamoDBEndpoint string
	App              string        // weir: the application, and so the lease table (new: created by weir)
	Batch            time.Duration // weir: the batch interval; 0 means stream's default
	Poll             time.Duration // plain: the wait after an empty read
	CPUProfile       string        // write a CPU profile of the child here
	MaxBufferedBytes int64         // weir: stream.Config.MaxBufferedBytes (0: default)
	OutputRate       float64       // weir: records/s the output sustains; 0: as fast as it can
	Duration         time.Duration // stop after this long even if not every record was output; 0: never
	Verbose          bool          // weir: log at debug level to stderr
	Backpressure     bool          // weir: kinesis.Config.Backpressure
	MemoryLimit      int64         // the Go runtime's soft memory limit (GOMEMLIMIT), as a user may set it; 0: none
	Work             int           // rounds of CPU work (see work) per record; 0: none
}

// Lines a child writes on its stdout, each read and timed by the parent.
const (
	lineFirst = "first" // the first record was consumed
	lineDone  = "done"  // every record was consumed
	lineStats = "stats" // followed by the JSON of a childStats; the last line
)

// childStats is what a child reports at its end.
type childStats struct {
	Records       int   // records consumed
	PeakRSS       int64 // bytes (VmHWM)
	PeakHeap      int64 // bytes of heap objects, the most seen
	PeakBuffered  int64 // weir: Stats.PeakBufferedBytes
	BufferBudget  int64 // weir: MaxBufferedBytes in force
	CheckpointsOK int64 // weir: checkpoints committed
}

// childMain runs a child if the environment asks for one, and reports
// whether it did (then the process must exit with the returned code).
func childMain() (bool, int) {
	raw := os.Getenv(envChild)
	if raw == "" {
		return false, 0
	}
	var p childParams
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return true, 2
	}
	if err := runChild(context.Background(), p, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return true, 1
	}
	return true, 0
}

func runChild(ctx context.Context, p childParams, out io.Writer) error {
	if p.MemoryLimit > 0 {
		debug.SetMemoryLimit(p.MemoryLimit)
	}
	if p.CPUProfile != "" {
		f, err := os.Create(p.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if p.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Duration)
		defer cancel()
	}
	heap := startHeapSampler()
	var st childStats
	var err error
	switch p.Consumer {
	case "plain":
		st, err = plainChild(ctx, p, out)
	case "weir":
		st, err = weirChild(ctx, p, out)
	default:
		err = fmt.Errorf("unknown consumer %q", p.Consumer)
	}
	if err != nil {
		return err
	}
	st.PeakHeap = heap.stop()
	st.PeakRSS = peakRSS()
	b, _ := json.Marshal(st)
	_, err = fmt.Fprintf(out, "%s %s\n", lineStats, b)
	return err
}

// reporter writes first and done once each.
type reporter struct {
	out   io.Writer
	want  int
	total atomic.Int64
	done  chan struct{}
}

func newReporter(out io.Writer, want int) *reporter {
	return &reporter{out: out, want: want, done: make(chan struct{})}
}

// add counts n consumed records; safe for concurrent use.
func (r *reporter) add(n int) {
	if n == 0 {
		return
	}
	after := r.total.Add(int64(n))
	before := after - int64(n)
	if before == 0 {
		fmt.Fprintln(r.out, lineFirst)
	}
	if before < int64(r.want) && after >= int64(r.want) {
		fmt.Fprintln(r.out, lineDone)
		close(r.done)
	}
}

// plainChild is the baseline a user could write by hand: the default AWS
// configuration, one GetRecords loop per shard from TRIM_HORIZON (Limit
// 10000, again at once after records, after p.Poll after an empty read),
// no checkpoints.
func plainChild(ctx context.Context, p childParams, out io.Writer) (childStats, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return childStats{}, err
	}
	client := awskinesis.NewFromConfig(awsCfg, func(o *awskinesis.Options) { o.BaseEndpoint = aws.String(p.KinesisEndpoint) })
	shards, err := client.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(p.Stream)})
	if err != nil {
		return childStats{}, err
	}
	rep := newReporter(out, p.Records)
	g, gctx := errgroup.WithContext(ctx)
	gctx, cancel := context.WithCancel(gctx)
	defer cancel()
	for _, sh := range shards.Shards {
		g.Go(func() error {
			it, err := client.GetShardIterator(gctx, &awskinesis.GetShardIteratorInput{
				StreamName: aws.String(p.Stream), ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				return err
			}
			for iter := it.ShardIterator; iter != nil; {
				out, err := client.GetRecords(gctx, &awskinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
				if err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return err
				}
				for range out.Records {
					work(p.Work)
				}
				rep.add(len(out.Records))
				iter = out.NextShardIterator
				if len(out.Records) == 0 {
					select {
					case <-gctx.Done():
						return nil
					case <-time.After(p.Poll):
					}
				}
			}
			return nil
		})
	}
	select {
	case <-rep.done:
	case <-gctx.Done():
	}
	cancel()
	if err := g.Wait(); err != nil {
		return childStats{}, err
	}
	return childStats{Records: int(rep.total.Load())}, nil
}

// weirChild is weir as a user configures it: leases and checkpoints on
// (the lease table named after the application, created by weir), every
// other setting its default but TRIM_HORIZON and the batch interval.
func weirChild(ctx context.Context, p childParams, out io.Writer) (childStats, error) {
	var logger *slog.Logger // nil: weir's default, discard
	if p.Verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		logger.Info("bench: weir child starting")
	}
	src, err := kinesis.New(kinesis.Config{
		Stream: p.Stream, App: p.App, InitialPosition: kinesis.TrimHorizon, Endpoint: p.KinesisEndpoint,
		Backpressure: p.Backpressure,
		Leases:       &leasetable.Config{Endpoint: p.DynamoDBEndpoint},
	})
	if err != nil {
		return childStats{}, err
	}
	sc, err := stream.NewPipeline(stream.Config{BatchInterval: p.Batch, Logger: logger, MaxBufferedBytes: p.MaxBufferedBytes})
	if err != nil {
		return childStats{}, err
	}
	rep := newReporter(out, p.Records)
	records := stream.From(sc, src)
	if p.Work > 0 {
		// Work per record, as a user would spread it: each shard's
		// records of a batch are a task, Config.Parallelism at a time.
		stream.ForEachPartition(records, func(_ context.Context, part stream.Partition[kinesis.Record]) error {
			for range part.All() {
				work(p.Work)
			}
			rep.add(part.Len())
			return nil
		})
		return runWeir(ctx, p, sc, src, rep)
	}
	var debt time.Duration // the slow output's time owed, one batch at a time
	stream.ForEachBatch(records, func(ctx context.Context, b *batch.Batch[kinesis.Record]) error {
		n := b.Len()
		if p.OutputRate > 0 {
			debt += time.Duration(float64(n) / p.OutputRate * float64(time.Second))
			start := time.Now()
			select {
			case <-time.After(debt):
			case <-ctx.Done():
			}
			debt -= time.Since(start)
		}
		rep.add(n)
		return nil
	})
	return runWeir(ctx, p, sc, src, rep)
}

// runWeir runs the pipeline sc, reading src, until rep has seen every
// record or ctx is done, and returns the child's stats.
func runWeir(ctx context.Context, p childParams, sc *stream.Pipeline, src *kinesis.Receiver, rep *reporter) (childStats, error) {
	runErr := make(chan error, 1)
	go func() { runErr <- sc.Run(ctx) }()
	select {
	case <-rep.done:
	case <-ctx.Done():
	case err := <-runErr:
		return childStats{}, fmt.Errorf("pipeline stopped after %d of %d records: %w", rep.total.Load(), p.Records, err)
	}
	st := src.Stats()
	sc.Stop()
	if err := <-runErr; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return childStats{}, err
	}
	return childStats{
		Records: int(rep.total.Load()), PeakBuffered: st.PeakBufferedBytes, BufferBudget: bufferBudget(p.MaxBufferedBytes),
		CheckpointsOK: src.CheckpointStats().Commits,
	}, nil
}

func bufferBudget(v int64) int64 {
	if v == 0 {
		return source.DefaultMaxBufferedBytes
	}
	return v
}

// workSink keeps the result of work alive, so that it is not optimized away.
var workSink atomic.Uint64

// work burns CPU for n rounds of a xorshift generator: the same
// computation for every consumer, calibrated by the parent (see
// calibrateWork) to a duration of CPU time per record.
func work(n int) {
	if n <= 0 {
		return
	}
	x := uint64(n) | 1
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	workSink.Add(x)
}

// calibrateWork returns the rounds of work that take about d of CPU time
// on this machine now (the fastest of a few tries, as other processes
// share the CPU).
func calibrateWork(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	const rounds = 1 << 22
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		work(rounds)
		best = min(best, time.Since(start))
	}
	return max(int(float64(rounds)*d.Seconds()/best.Seconds()), 1)
}
