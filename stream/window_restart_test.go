package stream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// TestTumblingWindowSurvivesCrashRestartBeforeItsTime: a pipeline with a
// recovery log and a tumbling Window (10 s) starts idle for a second (one
// empty batch, which reserves the batch times of the next 10 s in the
// log), reads records for 5 s, and its process dies at 7.5 s; it is
// restarted at once, before the window's time (10 s). A restart started
// before a window's time outputs the window whole (Pipeline.Drain), so
// every record must be in a window output. The restart's new batches
// follow the reserved times, but the window's time, among them, must still
// run: before, it did not, and the records read before the crash reached no
// output. The same with a drain instead of the crash.
func TestTumblingWindowSurvivesCrashRestartBeforeItsTime(t *testing.T) {
	for _, crash := range []bool{true, false} {
		name := "crash"
		if !crash {
			name = "drain"
		}
		t.Run(name, func(t *testing.T) { testTumblingWindowRestart(t, crash) })
	}
}

// firstBatch notes the first batch a Run started that it did not recover.
type firstBatch struct {
	stream.NopListener
	mu    sync.Mutex
	first batch.Time
	at    time.Time
}

func (f *firstBatch) BatchStarted(b stream.BatchInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == 0 && !b.Recovered {
		f.first, f.at = b.Time, time.Now()
	}
}

// testTumblingWindowRestart runs the test's two Runs, the first ending
// with a crash or a drain.
func testTumblingWindowRestart(t *testing.T, crash bool) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory()}
		var mu sync.Mutex
		var windowed int
		var times []batch.Time
		var fb *firstBatch
		run := func(idle time.Duration, records int, crash bool, after time.Duration) {
			fb = &firstBatch{}
			p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: d.log, Listeners: []stream.Listener{fb}})
			if err != nil {
				t.Fatal(err)
			}
			src := newReplay(t, d)
			w := stream.Window(stream.From(p, src), 10*time.Second, 10*time.Second)
			stream.ForEachBatch(w, func(_ context.Context, b *batch.Batch[string]) error {
				mu.Lock()
				defer mu.Unlock()
				if b.Len() > 0 {
					windowed += b.Len()
					times = append(times, b.Time())
				}
				return nil
			}, stream.Named("count"))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- p.Run(ctx) }()
			time.Sleep(idle)
			for range records {
				src.produce(d.record())
				time.Sleep(250 * time.Millisecond)
			}
			time.Sleep(after)
			if crash {
				d.log.Freeze(errors.New("the process died"))
				cancel()
				<-errc
				d.log.Freeze(nil)
				return
			}
			p.Drain(context.Background())
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
		// synctest's clock starts at a multiple of 10 s: run 1 lives from 0 s
		// to 7.5 s, its records read from 1.5 s to 6.5 s (window 10 s).
		time.Sleep(500 * time.Millisecond)
		run(time.Second, 20, crash, time.Second)
		// run 2 restarts at once (7.5 s), reads a few more records, and runs
		// past three window times before it drains.
		run(time.Second, 4, false, 30*time.Second)
		t.Logf("the restart's first new batch: %v, started at %v", fb.first, fb.at.UTC())
		mu.Lock()
		defer mu.Unlock()
		if windowed != d.n {
			t.Errorf("the windows' outputs hold %d records, want all %d produced (windows output at %v)", windowed, d.n, times)
		}
	})
}
