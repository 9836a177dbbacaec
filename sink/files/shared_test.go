package files_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
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
