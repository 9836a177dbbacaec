// Command wordcount counts words on a stream, batch by batch, and prints each
// batch's time, record count, top words and a running total.
//
// With no flags it needs nothing but Go, Node and npm: it installs and starts
// local Kinesis and DynamoDB servers on 127.0.0.1, creates a stream, produces
// generated text into it and counts the words read back from Kinesis.
//
//	go run ./examples/wordcount                     # local Kinesis, generated text
//	go run ./examples/wordcount -source memory      # no servers: the in-process memory source
//	go run ./examples/wordcount -stream words       # a real stream, usual AWS credential chain
//
// Ctrl-C (SIGINT) or SIGTERM drains: the receivers stop, every record already
// read is counted, and the program exits 0. A second one stops it at once,
// with status 130 (143 for SIGTERM), as a shell reports a process the
// signal killed.
//
// Each batch's counts are also written to a file of their own in the -out
// directory, named after the batch time (none for a batch without words;
// the files of the last day of batch times are kept), and the pipeline
// keeps a recovery log in the -state directory. After a crash (even
// kill -9), running the same command again recomputes the batches that were
// interrupted, with the same times and records, and writes each batch's
// file exactly once:
//
//	go run ./examples/wordcount -stream words -state st -out counts   # kill it, run it again
//
// With the local and memory sources, whose streams do not outlive the
// process, the log is kept in a temporary directory removed at exit unless
// -state is given.
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
	"sync"
	"syscall"
	"time"
)

// options are the command-line settings.
type options struct {
	source         string        // "local", "memory" or "kinesis"
	stream         string        // Kinesis stream name or ARN (real stream)
	endpoint       string        // Kinesis endpoint override (real stream)
	leases         bool          // leases and checkpoints in DynamoDB (real stream)
	dynamoEndpoint string        // DynamoDB endpoint override (real stream)
	region         string        // AWS region override (real stream)
	app            string        // application name
	shards         int           // shards of the local stream
	batch          time.Duration // batch interval
	rate           int           // generated lines per second (local and memory)
	top            int           // words printed per batch
	duration       time.Duration // stop after this long; 0 runs until a signal
	verbose        bool          // log at debug level to stderr
	state          string        // recovery log directory; "" for the default
	out            string        // per-batch count files directory

	monitor monitorOptions // -http, -http-public, -http-hosts: see monitor.go
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Getenv, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errInvalidFlags):
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(2)
	case err != nil:
		os.Exit(2) // the flag package has printed the error and the usage
	}

	ctx, stop := interrupted(os.Stderr, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
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
		fmt.Fprintln(w, "wordcount: draining; interrupt again to stop at once")
		cancel()
		select {
		case sig := <-ch:
			fmt.Fprintf(w, "wordcount: %v again: stopping at once\n", sig)
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

// run runs the example until ctx is done or, once the pipeline runs,
// o.duration has passed (setting up, such as installing and starting the
// local servers, does not count), then drains the pipeline; it returns nil
// after a clean drain.
func run(ctx context.Context, o options, out io.Writer) error {
	out = &syncWriter{w: out} // the pipeline's output and the producer's reports share it
	if o.source == "" {
		o.source = "local"
		if o.stream != "" {
			o.source = "kinesis"
		}
	}
	switch {
	case o.source != "memory" && o.source != "local" && o.source != "kinesis":
		return fmt.Errorf(`-source %q: must be "local", "memory" or "kinesis"`, o.source)
	case o.source == "kinesis" && o.stream == "":
		return errors.New(`-source kinesis needs -stream NAME (or WEIR_STREAM)`)
	case o.out == "":
		return errors.New("-out is empty: name the directory for the per-batch count files")
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	switch {
	case o.state == "" && o.source == "kinesis":
		o.state = "wordcount-state"
	case o.state == "":
		// The local and memory streams end with the process: so does the log.
		dir, err := os.MkdirTemp("", "wordcount-state-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.state = dir
	}
	switch o.source {
	case "memory":
		return runMemory(ctx, o, logger, out)
	case "local":
		return runLocal(ctx, o, logger, out)
	default:
		return runKinesis(ctx, o, logger, out)
	}
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
