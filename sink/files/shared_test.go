package files_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/files"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestSinkSharedByTwoOutputs runs a pipeline whose two outputs write to one
// Sink: both batches of a time go to one file. With a recovery log the
// second output's batch was taken for one written before a crash and
// skipped, its records lost in silence; without one it failed with
// ErrTimeReused, blaming the wall clock. The second output's first Write
// now fails Run, saying to give each output its own Sink, and nothing of
// it is taken for written.
func TestSinkSharedByTwoOutputs(t *testing.T) {
	for _, withLog := range []bool{true, false} {
		name := "without recovery log"
		if withLog {
			name = "with recovery log"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := stream.Config{BatchInterval: time.Second}
				if withLog {
					cfg.Recovery = recovery.Dir(filepath.Join(t.TempDir(), "log"))
				}
				p, err := stream.NewPipeline(cfg)
				if err != nil {
					t.Fatal(err)
				}
				src, err := memory.New[string](memory.Config{})
				if err != nil {
					t.Fatal(err)
				}
				sink, err := files.New(files.Config[string]{Dir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				defer sink.Close()
				in := stream.From(p, src)
				stream.ForEachBatch(in, sink.Write)
				stream.ForEachBatch(stream.Map(in, strings.ToUpper), sink.Write)
				if err := src.Push("a", "b"); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				err = p.Run(ctx)
				if err == nil || errors.Is(err, files.ErrTimeReused) || !strings.Contains(err.Error(), "give each output a Sink of its own") {
					t.Errorf("Run = %v, want an error saying to give each output a Sink of its own", err)
				}
				if err != nil && !strings.Contains(err.Error(), "output 1, ") {
					t.Errorf("Run = %v, want output 1's error (the second writer's)", err)
				}
			})
		})
	}
}

// TestSinkSharedByTwoRunningPipelines runs two pipelines at once, each
// with a recovery log, writing with one Sink: their batches of a time go
// to one file, and the second's was taken for one written before a crash
// and skipped, its records lost with no error. The second pipeline's
// Write now fails its Run, saying to give each pipeline's output a Sink
// of its own; a pipeline that runs after the other ended may use it.
func TestSinkSharedByTwoRunningPipelines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink, err := files.New(files.Config[string]{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer sink.Close()
		build := func(rec string) *stream.Pipeline {
			p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: recovery.Dir(t.TempDir())})
			if err != nil {
				t.Fatal(err)
			}
			src, err := memory.New[string](memory.Config{})
			if err != nil {
				t.Fatal(err)
			}
			stream.ForEachBatch(stream.From(p, src), sink.Write)
			if err := src.Push(rec); err != nil {
				t.Fatal(err)
			}
			return p
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		ps := []*stream.Pipeline{build("one"), build("two")}
		errs := make([]error, len(ps))
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Go(func() { errs[i] = p.Run(ctx) })
		}
		wg.Wait()
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
				if !strings.Contains(err.Error(), "give each output a Sink of its own") {
					t.Errorf("Run = %v, want an error saying to give each output a Sink of its own", err)
				}
			}
		}
		if failed != 1 {
			t.Errorf("Runs returned %v, want one of them to fail", errs)
		}

		// Both ended: a third pipeline may use the Sink.
		ctx3, cancel3 := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel3()
		if err := build("three").Run(ctx3); err != nil {
			t.Errorf("a pipeline run after the others ended: Run = %v", err)
		}
	})
}
