// Command kinesis measures how fast weir consumes a Kinesis stream against a
// baseline: a plain aws-sdk-go-v2 GetRecords loop per shard, in the same run,
// on the same local server and the same preloaded records.
//
//	go run ./bench/kinesis                       # 100000 x 100 B records, 4 shards, 3 runs each
//	go run ./bench/kinesis -records 20000 -runs 1
//	go run ./bench/kinesis -cpuprofile weir.prof  # CPU profiles of weir's runs only
//
// It starts a local Kinesis server (kinesalite) and, for weir's lease table
// and checkpoints, a local DynamoDB (dynalite) on 127.0.0.1, loads the
// records once, then alternates the two consumers, each reading the whole
// stream from TRIM_HORIZON, and prints records/s for both, their medians and
// the ratio weir/plain. Both wait -poll after an empty read. After a
// non-empty one the plain loop reads again at once; weir, while behind the
// tip of the shard, once -min-read (default: weir's, 200ms, Kinesis's 5
// reads/s per shard) passed since its previous call started, which on
// kinesalite is no wait at all: a full read of four shards at once takes
// longer than that. Timing weir ends when its output saw every record, so
// it includes the wait for the last batch (about half a -batch interval):
// a fixed cost of the micro-batch model, not of throughput. The default
// -batch 50ms keeps it near 30 ms a run; with -batch 100ms -block 20ms the
// median ratio here was 0.94-1.03 instead of 0.97-1.00.
package main

import (
	"context"
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
	records  int
	size     int
	shards   int
	runs     int
	batch    time.Duration
	block    time.Duration
	poll     time.Duration
	endpoint string
	verbose  bool
	cpuprof  string
	minRead  time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.records, "records", 100000, "number of records to load and consume")
	flag.IntVar(&o.size, "size", 100, "record size in bytes")
	flag.IntVar(&o.shards, "shards", 4, "number of shards")
	flag.IntVar(&o.runs, "runs", 3, "runs of each consumer (alternated); medians are reported")
	flag.DurationVar(&o.batch, "batch", 50*time.Millisecond, "weir's batch interval (and checkpoint interval)")
	flag.DurationVar(&o.block, "block", 10*time.Millisecond, "weir's block interval")
	flag.DurationVar(&o.poll, "poll", 50*time.Millisecond, "wait after an empty read, both consumers")
	flag.DurationVar(&o.minRead, "min-read", 0, "weir's MinReadInterval (0: weir's default)")
	flag.StringVar(&o.endpoint, "endpoint", "", "use this Kinesis endpoint (loopback) instead of starting kinesalite")
	flag.BoolVar(&o.verbose, "v", false, "log weir at debug level")
	flag.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of weir's runs (only) to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// result is one consumer's measurement.
type result struct {
	records int
	elapsed time.Duration
}

func (r result) rate() float64 { return float64(r.records) / r.elapsed.Seconds() }

func run(ctx context.Context, o options, out io.Writer) error {
	if o.records <= 0 || o.size <= 0 || o.shards <= 0 || o.runs <= 0 {
		return fmt.Errorf("-records, -size, -shards and -runs must be > 0")
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
	if err != nil {
		return err
	}
	defer env.Close()
	name := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := env.CreateStream(ctx, name, o.shards); err != nil {
		return err
	}
	start := time.Now()
	if err := load(ctx, env, name, o.records, o.size); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	fmt.Fprintf(out, "loaded %d records of %d B into %s (%d shards) in %v\n", o.records, o.size, name, o.shards, time.Since(start).Round(time.Millisecond))

	prof := &profiler{path: o.cpuprof}
	var plain, weir []float64
	for i := range o.runs {
		p, err := consumePlain(ctx, env, name, o)
		if err != nil {
			return fmt.Errorf("plain run %d: %w", i+1, err)
		}
		if err := prof.start(i + 1); err != nil {
			return err
		}
		w, err := consumeWeir(ctx, env, name, o, logger)
		if perr := prof.stop(); err == nil {
			err = perr
		}
		if err != nil {
			return fmt.Errorf("weir run %d: %w", i+1, err)
		}
		fmt.Fprintf(out, "run %d: plain %8.0f records/s (%v)   weir %8.0f records/s (%v)   ratio %.3f\n",
			i+1, p.rate(), p.elapsed.Round(time.Millisecond), w.rate(), w.elapsed.Round(time.Millisecond), w.rate()/p.rate())
		plain = append(plain, p.rate())
		weir = append(weir, w.rate())
	}
	mp, mw := median(plain), median(weir)
	fmt.Fprintf(out, "median: plain %.0f records/s, weir %.0f records/s, ratio weir/plain %.3f\n", mp, mw, mw/mp)
	return nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
