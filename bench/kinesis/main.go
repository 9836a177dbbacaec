// Command kinesis measures weir's Kinesis consumer against a baseline, a
// plain aws-sdk-go-v2 GetRecords loop per shard, in the same run, on the
// same local servers (kinesalite and dynalite, started on 127.0.0.1) and
// the same preloaded records.
//
//	go run ./bench/kinesis                          # throughput from a cold start: 100000 x 100 B, 4 shards, 5 runs each
//	go run ./bench/kinesis -mode latency            # put -> output latency at 100 records/s
//	go run ./bench/kinesis -mode memory -size 1000  # memory with an output 10x slower than input
//	go run ./bench/kinesis -cpuprofile weir.prof    # CPU profiles of weir's children
//	go run ./bench/kinesis -work 60us               # throughput with ~60µs of CPU work per record
//
// Throughput: every consumer run is a child process of its own, timed from
// the moment it is started until it has consumed every record, so it
// includes what a user's process pays: the Go runtime, the default AWS
// configuration, connections, and for weir creating its lease table
// (named after a new application each run), taking the leases and
// checkpointing. weir runs as a user configures it: leases on, TRIM_HORIZON,
// -batch (200ms) batches, every other setting its default. The plain loop
// reads again at once after records, and after -poll after an empty read.
// The two alternate (which goes first alternates too); medians of -runs
// runs, and the ratio of the medians, are reported, and each child
// process's CPU time (user + system, rusage) per record. The machine is
// shared: take the median of several invocations too. With -work, each
// consumer does the same CPU work for every record (the plain loop in its
// shard loops, weir in a ForEachPartition).
//
// Latency: a producer puts -rate records/s for -duration; each record
// carries its put time, and the output takes the difference. Four
// consumers read the stream at once: weir with its defaults (1s batches);
// weir in README's low-latency configuration (-poll PollInterval, -poll/5
// batches); a model of harlow/kinesis-consumer reading every -poll on a
// ticker (its default scan interval is 250ms: run with -poll 250ms), the
// same GetRecords rate; and a plain loop reading every 200ms, the most a
// shard's 5 reads/s allow. p50, p99, max and each one's GetRecords calls
// per second per shard are reported.
//
// Memory: the records are read by weir whose output sustains a tenth of the
// rate at which the plain loop read them, for -duration, with the default
// MaxBufferedBytes, with 16 MiB, with no limit, and with backpressure
// (-batch batches in every case); peak RSS, peak heap and
// the receiver's peak buffered bytes are reported, and the plain loop's
// peak RSS: what reading alone costs (the SDK decoding pages), the
// constant the budget does not cover.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"time"

	"github.com/weirstream/weir/internal/localaws"
)

// options are the command-line settings.
type options struct {
	mode     string
	records  int
	size     int
	shards   int
	runs     int
	batch    time.Duration
	poll     time.Duration
	rate     int
	duration time.Duration
	endpoint string
	verbose  bool
	cpuprof  string
	work     time.Duration
}

func main() {
	if isChild, code := childMain(); isChild {
		os.Exit(code)
	}
	var o options
	flag.StringVar(&o.mode, "mode", "throughput", "throughput, latency or memory")
	flag.IntVar(&o.records, "records", 100000, "records to load and consume (throughput, memory)")
	flag.IntVar(&o.size, "size", 100, "record size in bytes")
	flag.IntVar(&o.shards, "shards", 4, "number of shards")
	flag.IntVar(&o.runs, "runs", 5, "runs of each consumer (alternated); medians are reported")
	flag.DurationVar(&o.batch, "batch", 200*time.Millisecond, "weir's batch interval (throughput, memory)")
	flag.DurationVar(&o.poll, "poll", 200*time.Millisecond, "the plain loop's wait after an empty read (latency: the harlow model's read interval, and weir's PollInterval in its low-latency run)")
	flag.IntVar(&o.rate, "rate", 100, "records/s put during the latency run")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "length of a latency or memory run")
	flag.StringVar(&o.endpoint, "endpoint", "", "use this Kinesis endpoint (loopback) instead of starting kinesalite")
	flag.BoolVar(&o.verbose, "v", false, "log at debug level")
	flag.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of each weir child to this file (run n > 1: file.n)")
	flag.DurationVar(&o.work, "work", 0, "CPU work per record in throughput mode (e.g. 60us), the same computation in both consumers")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.records <= 0 || o.size <= 0 || o.shards <= 0 || o.runs <= 0 || o.rate <= 0 || o.duration <= 0 {
		return fmt.Errorf("-records, -size, -shards, -runs, -rate and -duration must be > 0")
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if o.endpoint != "" {
		os.Setenv(localaws.EnvKinesisEndpoint, o.endpoint)
	}
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true, Logger: logger})
	if err != nil && o.endpoint != "" && errors.Is(err, localaws.ErrNotLoopback) {
		return fmt.Errorf("-endpoint %q: %w", o.endpoint, err)
	}
	if err != nil {
		return err
	}
	defer env.Close()
	switch o.mode {
	case "throughput":
		return throughput(ctx, env, o, out)
	case "latency":
		return latency(ctx, env, o, out, logger)
	case "memory":
		return memory(ctx, env, o, out)
	}
	return fmt.Errorf("-mode %q: must be throughput, latency or memory", o.mode)
}

// newLoadedStream creates a stream and loads o.records records into it.
func newLoadedStream(ctx context.Context, env *localaws.Env, o options, out io.Writer) (string, error) {
	name := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := env.CreateStream(ctx, name, o.shards); err != nil {
		return "", err
	}
	start := time.Now()
	if err := load(ctx, env, name, o.records, o.size); err != nil {
		return "", fmt.Errorf("load: %w", err)
	}
	fmt.Fprintf(out, "loaded %d records of %d B into %s (%d shards) in %v\n", o.records, o.size, name, o.shards, time.Since(start).Round(time.Millisecond))
	return name, nil
}

// throughput times both consumers from their process start, alternated.
func throughput(ctx context.Context, env *localaws.Env, o options, out io.Writer) error {
	name, err := newLoadedStream(ctx, env, o, out)
	if err != nil {
		return err
	}
	base := childParams{Stream: name, Records: o.records, KinesisEndpoint: env.KinesisEndpoint, DynamoDBEndpoint: env.DynamoDBEndpoint}
	if o.work > 0 {
		base.Work = calibrateWork(o.work)
		fmt.Fprintf(out, "work: %d rounds per record (about %v of CPU here now), in the plain loop's shard loops and in a weir ForEachPartition\n", base.Work, o.work)
	}
	var plain, weir, ratios, plainCPU, weirCPU, cpuRatios []float64
	for i := range o.runs {
		pp := base
		pp.Consumer, pp.Poll = "plain", o.poll
		wp := base
		wp.Consumer, wp.Batch, wp.Verbose = "weir", o.batch, o.verbose
		wp.App = "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) // a new lease table: a first start
		if o.cpuprof != "" {
			wp.CPUProfile = profilePath(o.cpuprof, i+1)
		}
		order := []*childParams{&pp, &wp}
		if i%2 == 1 {
			order = []*childParams{&wp, &pp}
		}
		res := map[string]childResult{}
		for _, p := range order {
			r, err := spawn(ctx, *p)
			if err != nil {
				return fmt.Errorf("run %d: %w", i+1, err)
			}
			if r.done == 0 || r.stats.Records != o.records {
				return fmt.Errorf("run %d: %s consumed %d of %d records", i+1, p.Consumer, r.stats.Records, o.records)
			}
			res[p.Consumer] = r
		}
		p, w := res["plain"], res["weir"]
		fmt.Fprintf(out, "run %d: plain %v (first record %v, CPU %v)   weir %v (first record %v, CPU %v, %d checkpoints)   weir/plain %.3f, CPU weir/plain %.3f\n",
			i+1, p.done.Round(time.Millisecond), p.first.Round(time.Millisecond), p.cpu.Round(time.Millisecond),
			w.done.Round(time.Millisecond), w.first.Round(time.Millisecond), w.cpu.Round(time.Millisecond), w.stats.CheckpointsOK,
			p.done.Seconds()/w.done.Seconds(), w.cpu.Seconds()/p.cpu.Seconds())
		plain = append(plain, p.done.Seconds())
		weir = append(weir, w.done.Seconds())
		ratios = append(ratios, p.done.Seconds()/w.done.Seconds())
		plainCPU = append(plainCPU, p.cpu.Seconds())
		weirCPU = append(weirCPU, w.cpu.Seconds())
		cpuRatios = append(cpuRatios, w.cpu.Seconds()/p.cpu.Seconds())
	}
	mp, mw := median(plain), median(weir)
	fmt.Fprintf(out, "median from process start to the last record: plain %.3fs (%.0f records/s), weir %.3fs (%.0f records/s), weir/plain %.3f\n",
		mp, float64(o.records)/mp, mw, float64(o.records)/mw, mp/mw)
	// Runs next to each other share the machine's load: their ratio is
	// steadier than the ratio of the medians when the load drifts.
	fmt.Fprintf(out, "median of the per-run ratios weir/plain: %.3f\n", median(ratios))
	// CPU time is the whole child process's (user + system, from rusage),
	// from its start to its exit: what a user is billed for.
	mpc, mwc := median(plainCPU), median(weirCPU)
	fmt.Fprintf(out, "median process CPU per record: plain %.2fµs, weir %.2fµs, weir/plain %.3f (median of the per-run ratios %.3f)\n",
		mpc/float64(o.records)*1e6, mwc/float64(o.records)*1e6, mwc/mpc, median(cpuRatios))
	return nil
}

// profilePath is the CPU profile file of run n (from 1).
func profilePath(path string, n int) string {
	if n == 1 {
		return path
	}
	return path + "." + strconv.Itoa(n)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// memory reads the records with an output ten times slower than input.
func memory(ctx context.Context, env *localaws.Env, o options, out io.Writer) error {
	name, err := newLoadedStream(ctx, env, o, out)
	if err != nil {
		return err
	}
	base := childParams{Stream: name, Records: o.records, KinesisEndpoint: env.KinesisEndpoint, DynamoDBEndpoint: env.DynamoDBEndpoint}
	pp := base
	pp.Consumer, pp.Poll = "plain", o.poll
	p, err := spawn(ctx, pp)
	if err != nil {
		return err
	}
	input := float64(o.records) / (p.done - p.first).Seconds()
	fmt.Fprintf(out, "input: the plain loop read %.0f records/s (peak RSS %s); weir's output sustains %.0f records/s, for %v\n",
		input, mib(p.stats.PeakRSS), input/10, o.duration)
	for _, c := range []struct {
		name         string
		budget       int64
		backpressure bool
		memoryLimit  int64
	}{
		{"default MaxBufferedBytes", 0, false, 0},
		{"default MaxBufferedBytes, GOMEMLIMIT 96 MiB (the budget + 32 MiB)", 0, false, 96 << 20},
		{"MaxBufferedBytes 16 MiB", 16 << 20, false, 0},
		{"no limit (-1)", -1, false, 0},
		{"default MaxBufferedBytes, Backpressure", 0, true, 0},
	} {
		wp := base
		wp.Consumer, wp.App = "weir", "bench-"+strconv.FormatInt(time.Now().UnixNano(), 36)
		wp.MaxBufferedBytes, wp.OutputRate, wp.Duration = c.budget, input/10, o.duration
		wp.Backpressure, wp.Batch, wp.MemoryLimit = c.backpressure, o.batch, c.memoryLimit
		r, err := spawn(ctx, wp)
		if err != nil {
			return err
		}
		budget := "none"
		if r.stats.BufferBudget > 0 {
			budget = mib(r.stats.BufferBudget)
		}
		fmt.Fprintf(out, "weir, %s: budget %s, peak buffered %s, peak heap objects %s, peak RSS %s, %d records output\n",
			c.name, budget, mib(r.stats.PeakBuffered), mib(r.stats.PeakHeap), mib(r.stats.PeakRSS), r.stats.Records)
	}
	return nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
