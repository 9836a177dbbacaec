package kinesis_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/kinesis"
	weirsource "github.com/weirstream/weir/source"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// logBuffer is a bytes.Buffer safe for a logger's concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runOutputs runs, in a synctest bubble, a pipeline over a memory source
// holding one record, its outputs those outputs adds, with the driver's
// logs in logs, and returns Run's error (a deadline's once 5 s of the
// bubble's time passed). With fleet set the pipeline has a recovery log
// and its source shares its shards with other workers.
func runOutputs(t *testing.T, fleet bool, logs *logBuffer, outputs func(in *stream.Stream[source.Record])) error {
	t.Helper()
	var err error
	synctest.Test(t, func(t *testing.T) {
		cfg := stream.Config{BatchInterval: time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))}
		if fleet {
			cfg.Recovery = recovery.Dir(filepath.Join(t.TempDir(), "log"))
		}
		p, perr := stream.NewPipeline(cfg)
		if perr != nil {
			t.Fatal(perr)
		}
		src, perr := memory.New[source.Record](memory.Config{})
		if perr != nil {
			t.Fatal(perr)
		}
		if perr := src.Push(source.Record{Data: []byte("k/1")}); perr != nil {
			t.Fatal(perr)
		}
		var from weirsource.Receiver[source.Record] = src
		if fleet {
			from = sharing{src}
		}
		outputs(stream.From(p, from))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		err = p.Run(ctx)
	})
	return err
}

func dataOf(r source.Record) (string, []byte) { return "k", r.Data }

// TestSinkSharedByTwoOutputs runs a pipeline whose two outputs write with
// one Sink with Origin: both outputs' batches of a time had the same
// origin tags, so a reader's duplicate filter dropped one output's records
// as copies of the other's, with no error anywhere. The second output's
// first Write now fails Run at once (no retries), saying to give each
// output a Sink of its own; one output per Sink still runs.
func TestSinkSharedByTwoOutputs(t *testing.T) {
	f := newFake(t, nil)
	s, err := kinesis.New(kinesis.Config[source.Record]{Client: f, Stream: "out", Record: dataOf, Origin: "app/out"})
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	err = runOutputs(t, false, &logs, func(in *stream.Stream[source.Record]) {
		stream.ForEachBatch(in, s.Write)
		stream.ForEachBatch(stream.Map(in, func(r source.Record) source.Record { return r }), s.Write)
	})
	if err == nil || !strings.Contains(err.Error(), "give each output a Sink of its own") || !strings.Contains(err.Error(), "output 1, ") {
		t.Errorf("Run = %v, want output 1's error saying to give each output a Sink of its own", err)
	}
	if got := logs.String(); strings.Contains(got, "trying again") {
		t.Errorf("the refusal was tried again before Run failed:\n%s", got)
	}
}

// TestOriginRefusalsNotRetried: an Origin too long for a tag's writer
// once the writer names the Run (no recovery log) or the worker (a source
// sharing its shards) fails Write with ErrInvalidConfig at every try.
// Run went through the output's retries first ("trying again" warnings,
// or the batch quarantined with stream.Quarantine); it now fails at once.
func TestOriginRefusalsNotRetried(t *testing.T) {
	for _, fleet := range []bool{false, true} {
		f := newFake(t, nil)
		s, err := kinesis.New(kinesis.Config[source.Record]{Client: f, Stream: "out", Record: dataOf, Origin: strings.Repeat("o", 128)})
		if err != nil {
			t.Fatal(err)
		}
		var logs logBuffer
		err = runOutputs(t, fleet, &logs, func(in *stream.Stream[source.Record]) {
			stream.ForEachBatch(in, func(ctx context.Context, b *batch.Batch[source.Record]) error { return s.Write(ctx, b) })
		})
		if !errors.Is(err, kinesis.ErrInvalidConfig) {
			t.Errorf("fleet %v: Run = %v, want ErrInvalidConfig", fleet, err)
		}
		if got := logs.String(); strings.Contains(got, "trying again") {
			t.Errorf("fleet %v: the refusal was tried again before Run failed:\n%s", fleet, got)
		}
	}
}
