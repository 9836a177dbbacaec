package files_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/files"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// laggingClock is the (virtual) time minus a lag the test sets, without a
// monotonic reading: a wall clock stepped back, as a pipeline reads it.
type laggingClock struct {
	mu  sync.Mutex
	lag time.Duration
}

func (c *laggingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(-c.lag).Round(0)
}

func (c *laggingClock) NewTimer(d time.Duration) clock.Timer   { return clock.Real{}.NewTimer(d) }
func (c *laggingClock) NewTicker(d time.Duration) clock.Ticker { return clock.Real{}.NewTicker(d) }

// TestClockSteppedBackWithoutLog runs a pipeline without a recovery log
// into a files sink, then another on the same directory after the wall
// clock stepped back, so that its batch gets the time of the first Run's:
// the sink must not take that batch for the one written (which only a
// recomputation with a log repeats) and drop its records in silence. It
// refuses to write over the file, and the Run stops with ErrTimeReused.
func TestClockSteppedBackWithoutLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		dir := t.TempDir()
		clk := &laggingClock{}
		run := func(rec string) (batch.Time, error) {
			t.Helper()
			sink, err := files.New(files.Config[string]{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			src, err := memory.New[string](memory.Config{})
			if err != nil {
				t.Fatal(err)
			}
			var written batch.Time
			stream.ForEachBatch(stream.From(p, src), func(ctx context.Context, b *batch.Batch[string]) error {
				if b.Len() > 0 {
					written = b.Time()
				}
				return sink.Write(ctx, b)
			}, stream.Retry(0))
			errc := make(chan error, 1)
			go func() { errc <- p.Run(t.Context()) }()
			time.Sleep(iv / 4)
			if err := src.Push(rec); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * iv)
			p.Drain(context.Background())
			err = <-errc
			return written, err
		}
		if _, err := run("first"); err != nil {
			t.Fatal(err)
		}
		clk.lag = 2 * iv // stepped back over the first Run's batches
		at, err := run("second")
		sink, nerr := files.New(files.Config[string]{Dir: dir})
		if nerr != nil {
			t.Fatal(nerr)
		}
		defer sink.Close()
		data, rerr := os.ReadFile(sink.Path(at))
		if rerr != nil || string(data) != "first\n" {
			t.Errorf("file of batch %v holds %q (%v), want the first Run's record", at, data, rerr)
		}
		if !errors.Is(err, files.ErrTimeReused) {
			t.Errorf("the second Run, whose batch reused the time %v of a file, returned %v, want an error wrapping ErrTimeReused: its record was dropped", at, err)
		}
	})
}

// TestRecomputedBatchWithLogSkipped writes each batch of a pipeline with a
// recovery log twice, the second time with other records, as a batch
// recomputed after a crash gives a Format or Encode that is not
// deterministic: with a log a batch time is never reused, so the file is
// the batch's and the second Write is skipped, not refused with
// ErrTimeReused (which would stop every restart after a crash). The same
// pipeline without a log gets ErrTimeReused.
func TestRecomputedBatchWithLogSkipped(t *testing.T) {
	for _, withLog := range []bool{true, false} {
		t.Run(map[bool]string{true: "log", false: "nolog"}[withLog], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const iv = time.Second
				dir := t.TempDir()
				sink, err := files.New(files.Config[string]{Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				defer sink.Close()
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
				var again error
				var at batch.Time
				stream.ForEachBatch(stream.From(p, src), func(ctx context.Context, b *batch.Batch[string]) error {
					if err := sink.Write(ctx, b); err != nil || b.Len() == 0 {
						return err
					}
					at, again = b.Time(), sink.Write(ctx, batch.Derive(b, []string{"other"}))
					return nil
				})
				errc := make(chan error, 1)
				go func() { errc <- p.Run(t.Context()) }()
				time.Sleep(iv / 4)
				if err := src.Push("first"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * iv)
				p.Drain(context.Background())
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if at == 0 {
					t.Fatal("no batch with the record was written")
				}
				switch {
				case withLog && again != nil:
					t.Errorf("with a recovery log, writing batch %v again with other records returned %v, want nil (skipped)", at, again)
				case !withLog && !errors.Is(again, files.ErrTimeReused):
					t.Errorf("without a recovery log, writing batch %v again with other records returned %v, want ErrTimeReused", at, again)
				}
				data, err := os.ReadFile(sink.Path(at))
				if err != nil || string(data) != "first\n" {
					t.Errorf("file of batch %v holds %q (%v), want the first write's record", at, data, err)
				}
			})
		})
	}
}
