package deadletter_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/deadletter"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestQuarantineTimeReused quarantines, from a pipeline's output, a batch's
// letters and then other letters of the same batch time and output. With a
// recovery log that is a batch recomputed after a crash, which may fail
// other records than the first time: its letters replace the file's.
// Without one, batch times come from the wall clock and the second call is
// a later Run's batch after the clock went back: replacing would lose the
// first letters, so the file is kept and Quarantine fails with
// ErrTimeReused; the same letters again are no error.
func TestQuarantineTimeReused(t *testing.T) {
	for _, withLog := range []bool{true, false} {
		t.Run(map[bool]string{true: "log", false: "nolog"}[withLog], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const iv = time.Second
				d, err := deadletter.Open(filepath.Join(t.TempDir(), "dead"))
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				cfg := stream.Config{BatchInterval: iv}
				if withLog {
					cfg.Recovery = recovery.Dir(t.TempDir())
				}
				p, err := stream.NewPipeline(cfg)
				if err != nil {
					t.Fatal(err)
				}
				src, err := memory.New[string](memory.Config{})
				if err != nil {
					t.Fatal(err)
				}
				var same, other error
				var at batch.Time
				stream.ForEachBatch(stream.From(p, src), func(ctx context.Context, b *batch.Batch[string]) error {
					if b.Len() == 0 {
						return nil
					}
					at = b.Time()
					if err := d.Quarantine(ctx, letters(at, 0, "first")); err != nil {
						return err
					}
					same = d.Quarantine(ctx, letters(at, 0, "first"))
					other = d.Quarantine(ctx, letters(at, 0, "second"))
					return nil
				})
				errc := make(chan error, 1)
				go func() { errc <- p.Run(t.Context()) }()
				time.Sleep(iv / 4)
				if err := src.Push("r"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * iv)
				p.Drain(context.Background())
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if at == 0 {
					t.Fatal("no batch with the record ran")
				}
				if same != nil {
					t.Errorf("the same letters quarantined again = %v, want nil", same)
				}
				want := letters(at, 0, "first")
				switch {
				case withLog && other != nil:
					t.Errorf("with a recovery log, other letters of batch %v = %v, want nil (they replace the file's)", at, other)
				case withLog:
					want = letters(at, 0, "second")
				case !errors.Is(other, deadletter.ErrTimeReused):
					t.Errorf("without a recovery log, other letters of batch %v = %v, want ErrTimeReused", at, other)
				}
				got, err := d.Letters()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("letters (-want +got):\n%s", diff)
				}
			})
		})
	}
}
