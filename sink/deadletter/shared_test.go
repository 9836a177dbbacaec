package deadletter_test

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
	"github.com/weirstream/weir/sink/deadletter"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestDirSharedByTwoRunningPipelines runs two pipelines at once, each
// with a recovery log, quarantining to one Dir: their batches of a time
// and output have one file, and the second replaced the first's letters,
// taken for its own written before a crash, which were lost with no error.
// The second pipeline's Quarantine now fails its batch, saying to give
// each pipeline a directory of its own; a pipeline that runs after the
// other ended may use the Dir.
func TestDirSharedByTwoRunningPipelines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := deadletter.Open(filepath.Join(t.TempDir(), "dead"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		build := func(rec string) (*stream.Pipeline, *memory.Source[string]) {
			p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: recovery.Dir(t.TempDir())})
			if err != nil {
				t.Fatal(err)
			}
			src, err := memory.New[string](memory.Config{})
			if err != nil {
				t.Fatal(err)
			}
			stream.ForEach(stream.From(p, src), func(context.Context, string) error { return errors.New("fails") },
				stream.Retry(0), stream.Quarantine(d))
			if err := src.Push(rec); err != nil {
				t.Fatal(err)
			}
			return p, src
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		p1, _ := build("one")
		p2, _ := build("two")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, p := range []*stream.Pipeline{p1, p2} {
			wg.Go(func() { errs[i] = p.Run(ctx) })
		}
		wg.Wait()
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
				if !strings.Contains(err.Error(), "give each pipeline a directory of its own") {
					t.Errorf("Run = %v, want an error saying to give each pipeline a directory of its own", err)
				}
			}
		}
		if failed != 1 {
			t.Errorf("Runs returned %v, want one of them to fail", errs)
		}

		// Both ended: a third pipeline may use the Dir.
		p3, _ := build("three")
		ctx3, cancel3 := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel3()
		if err := p3.Run(ctx3); err != nil {
			t.Errorf("a pipeline run after the others ended: Run = %v", err)
		}
	})
}
