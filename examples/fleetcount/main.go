// Command fleetcount counts the records of a Kinesis stream per key with
// any number of worker processes sharing the stream, and keeps each key's
// count in a DynamoDB table. A record's key is its data up to the first
// comma (the whole data if it has none).
//
// The pipeline: a Kinesis receiver with leases (the workers share the
// stream's shards), each record mapped to (key, 1), repartition.ByKey
// through the intermediate stream <app>-by-key (every record of a key then
// comes from one shard, so one worker counts it), a running count per key
// (stream.MapWithState), and each batch's new counts written to the table
// (-table), an item per key. A write is conditional on the count being
// greater than the table's, so a batch run again never moves a count
// backwards.
//
// With no flags it starts local Kinesis and DynamoDB servers on 127.0.0.1
// (installing them with npm on first use), puts 1000 demo records, counts
// them, prints the table and exits:
//
//	go run ./examples/fleetcount
//
// A fleet: the same command on each worker, each with its own -state
// directory (its name and lease state, kept across restarts):
//
//	go run ./examples/fleetcount -stream events -state /var/lib/fleetcount
//
// SIGTERM or Ctrl-C drains: the receivers stop, every record read is
// counted and written, the leases are handed back, and the program exits 0.
// A second one stops it at once, with status 143 for SIGTERM (130 for
// Ctrl-C), as a shell reports a process the signal killed; its leases then
// expire, as a crashed worker's do.
// Bad flags exit 2. README.md, "Running a fleet", says what holds.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/localaws"
	"github.com/weirstream/weir/repartition"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// options are the command-line settings (see parseFlags).
type options struct {
	stream            string
	app               string
	table             string
	kinesisEndpoint   string
	dynamoEndpoint    string
	region            string
	state             string
	worker            string
	repartitionShards int
	shards            int
	put               int
	batch             time.Duration
	checkpoint        time.Duration
	leaseDuration     time.Duration
	verbose           bool
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errInvalidFlags):
		fmt.Fprintln(os.Stderr, "fleetcount:", err)
		os.Exit(2)
	case err != nil:
		os.Exit(2) // the flag package has printed the error and the usage
	}
	ctx, stop := interrupted(os.Stderr, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleetcount:", err)
		os.Exit(1)
	}
}

// interrupted returns a context cancelled at the first of sigs, which
// drains the pipeline, and a function that stops watching for them. At the
// second, it says so on w and exits at once, with the status a shell gives
// a process the signal killed (128 + its number: 130 for Ctrl-C), so that
// a drain waiting for something stuck cannot keep the program running.
func interrupted(w io.Writer, sigs ...os.Signal) (context.Context, func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, sigs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ch:
		case <-done:
			return
		}
		fmt.Fprintln(w, "fleetcount: draining; interrupt again to stop at once")
		cancel()
		select {
		case sig := <-ch:
			fmt.Fprintf(w, "fleetcount: %v again: stopping at once\n", sig)
			status := 1
			if n, ok := sig.(syscall.Signal); ok {
				status = 128 + int(n)
			}
			os.Exit(status)
		case <-done:
		}
	})
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
		cancel()
	}
}

// run counts until ctx is done, then drains and returns nil after a clean
// drain. Without -stream it runs the demo: local servers, -put records,
// and a drain once they are all counted.
func run(ctx context.Context, o options, out io.Writer) error {
	out = &syncWriter{w: out} // the pipeline's output and the demo's report share it
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if o.stream != "" {
		if o.table == "" {
			o.table = o.app + "-counts"
		}
		var opts []func(*config.LoadOptions) error
		if o.region != "" {
			opts = append(opts, config.WithRegion(o.region))
		}
		awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return fmt.Errorf("load AWS configuration: %w", err)
		}
		if o.state == "" {
			o.state = "fleetcount-state"
		}
		return count(ctx, o, awsCfg, logger, out, false)
	}

	fmt.Fprintln(out, "starting local Kinesis and DynamoDB servers on 127.0.0.1 (installing them with npm on first use)...")
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true, DynamoDB: true, Logger: logger})
	if err != nil {
		return fmt.Errorf("local servers: %w", err)
	}
	defer env.Close()
	o.stream = "fleetcount-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if o.app == defaultApp {
		// Tables and an intermediate stream of the demo's own: servers
		// already running (weir-local's WEIR_*_ENDPOINT variables) keep
		// those of earlier demos, whose checkpoints name another stream's
		// records and whose counts are not this one's.
		o.app = o.stream
	}
	if o.table == "" {
		o.table = o.app + "-counts"
	}
	o.kinesisEndpoint, o.dynamoEndpoint = env.KinesisEndpoint, env.DynamoDBEndpoint
	if o.shards == 0 {
		o.shards = 4
	}
	if o.put == 0 {
		o.put = 1000
	}
	if o.state == "" { // the local servers end with the process: so does the state
		dir, err := os.MkdirTemp("", "fleetcount-state-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.state = dir
	}
	return count(ctx, o, env.AWSConfig(), logger, out, true)
}

// count runs one worker of the fleet. With demo, it drains once the
// records it put are all in the table (or 30s later) and prints the table.
func count(ctx context.Context, o options, awsCfg aws.Config, logger *slog.Logger, out io.Writer, demo bool) error {
	worker := o.worker
	if worker == "" {
		var err error
		if worker, err = workerName(o.state); err != nil {
			return err
		}
	}
	kc := awskinesis.NewFromConfig(awsCfg, func(k *awskinesis.Options) {
		if o.kinesisEndpoint != "" {
			k.BaseEndpoint = aws.String(o.kinesisEndpoint)
		}
	})
	db := dynamodb.NewFromConfig(awsCfg, func(d *dynamodb.Options) {
		if o.dynamoEndpoint != "" {
			d.BaseEndpoint = aws.String(o.dynamoEndpoint)
		}
	})
	if o.shards > 0 {
		err := localaws.CreateStreamOn(ctx, kc, o.stream, o.shards)
		var exists *types.ResourceInUseException
		if err != nil && !errors.As(err, &exists) {
			return err
		}
	}
	// Before anything is created for it (the counts table, the
	// intermediate stream): a mistyped -stream must not leave them behind.
	if _, err := kc.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(o.stream)}); err != nil {
		var missing *types.ResourceNotFoundException
		if errors.As(err, &missing) {
			return fmt.Errorf("stream %q not found: check -stream (and -region), or pass -shards to create it: %w", o.stream, err)
		}
		return fmt.Errorf("describe stream %q%s: %w", o.stream, unanswered(err, "-kinesis-endpoint"), err)
	}
	if o.put > 0 {
		if err := putDemoRecords(ctx, kc, o.stream, o.put); err != nil {
			return err
		}
		fmt.Fprintf(out, "put %d records on %s\n", o.put, o.stream)
	}
	table, err := openCountTable(ctx, db, o.table, logger)
	if err != nil {
		return err
	}

	// One lease configuration for the source and the intermediate stream:
	// each gets a table of its own (<app>, <app>-by-key.leases). The state
	// directory lets a restarted worker take its own leases back at once.
	leases := &leasetable.Config{AWS: &awsCfg, Endpoint: o.dynamoEndpoint, StateDir: filepath.Join(o.state, "leases"),
		LeaseDuration: o.leaseDuration, CheckpointInterval: o.checkpoint}
	src, err := kinesis.New(kinesis.Config{Stream: o.stream, App: o.app, InitialPosition: kinesis.TrimHorizon,
		AWS: &awsCfg, Endpoint: o.kinesisEndpoint, Logger: logger, Leases: leases})
	if err != nil {
		return err
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: o.batch, Logger: logger})
	if err != nil {
		return err
	}
	ones := stream.Map(stream.From(p, src), func(r kinesis.Record) stream.Pair[string, int64] {
		key, _, _ := strings.Cut(string(r.Data), ",")
		return stream.Pair[string, int64]{Key: key, Value: 1}
	})
	byKey, err := repartition.ByKey(ctx, ones, repartition.Config[string, int64]{
		Stream: o.app + "-by-key", Shards: o.repartitionShards, Writer: worker, Leases: leases,
		AWS: &awsCfg, Endpoint: o.kinesisEndpoint,
	})
	if err != nil {
		return err
	}
	// The running count of each key after each of its records: only the
	// keys of a batch's records are written, not every key every batch.
	counts, _ := stream.MapWithState(byKey, func(key string, n int64, st *stream.State[int64]) (stream.Pair[string, int64], bool) {
		st.Update(st.Get() + n)
		return stream.Pair[string, int64]{Key: key, Value: st.Get()}, true
	})
	stream.ForEachBatch(counts, func(ctx context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		keys, err := table.write(ctx, b)
		if err == nil && keys > 0 {
			fmt.Fprintf(out, "batch %s  records %d  keys written %d  this worker's total %d\n",
				b.Time().Std().Format("15:04:05.000"), b.Len(), keys, table.total())
		}
		return err
	}, stream.Named("counts"))
	fmt.Fprintf(out, "worker %s counting %s into table %s (intermediate stream %s-by-key)\n", worker, o.stream, o.table, o.app)

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var demoDone sync.WaitGroup
	if demo {
		demoDone.Go(func() {
			defer stopRun() // drain once every record put is counted
			if !awaitTotal(runCtx, table, int64(o.put), 30*time.Second) {
				fmt.Fprintf(out, "counted %d of %d records; draining\n", table.total(), o.put)
			}
		})
	}
	err = p.Run(runCtx) // until SIGTERM, Ctrl-C or the demo's end, then drains
	stopRun()
	demoDone.Wait()
	if err != nil || !demo {
		return err
	}
	items, err := table.scan(ctx)
	if err != nil {
		return err
	}
	var total int64
	for _, it := range items {
		fmt.Fprintf(out, "%s %d\n", it.Key, it.Count)
		total += it.Count
	}
	fmt.Fprintf(out, "counted %d of %d records in %d keys\n", total, o.put, len(items))
	return nil
}

// awaitTotal waits until table's total reaches want, ctx is done or wait
// has passed, whichever is first; it reports whether the total reached want.
func awaitTotal(ctx context.Context, table *countTable, want int64, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for table.total() < want {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// putDemoRecords puts n records "key-NN,i" (16 keys) on the stream, each
// with its own partition key, so that every key is on every shard.
func putDemoRecords(ctx context.Context, kc *awskinesis.Client, name string, n int) error {
	data := make([][]byte, n)
	for i := range data {
		data[i] = fmt.Appendf(nil, "key-%02d,%d", i%16, i)
	}
	return localaws.PutRecordsOn(ctx, kc, name, data, nil)
}

// workerName returns the worker's name kept in the state directory, made
// up (host name and random hex digits) and kept there on first use: the
// same across restarts on the directory, and another for another worker.
func workerName(state string) (string, error) {
	path := filepath.Join(state, "worker")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("-state: %w", err)
	}
	host, _ := os.Hostname()
	name := fmt.Sprintf("%s-%s", host, rand.Text()[:8])
	if err := os.MkdirAll(state, 0o700); err != nil {
		return "", fmt.Errorf("-state: %w", err)
	}
	// Written to a temporary file, synced and renamed: a crash leaves the
	// name whole or absent, never half written.
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", fmt.Errorf("-state: %w", err)
	}
	_, err = f.WriteString(name + "\n")
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return "", fmt.Errorf("-state: keep the worker's name: %w", err)
	}
	return name, nil
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// unanswered returns, for the error of an AWS call no service answered
// (a wrong endpoint or region, no network), what to check, the endpoint's
// flag first; "" for an answer (an API error) or a cancelled call.
func unanswered(err error, endpointFlag string) string {
	var api smithy.APIError
	if errors.As(err, &api) || errors.Is(err, context.Canceled) {
		return ""
	}
	return " (no answer: check " + endpointFlag + ", -region and the network)"
}
