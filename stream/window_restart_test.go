package stream_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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

// completions counts, by batch time, the batches that completed, and by
// Run the batches scheduled and started.
type completions struct {
	stream.NopListener
	mu             sync.Mutex
	done           map[batch.Time]int
	run            int
	by             map[batch.Time][]int // the Runs in which it completed
	sched, started map[int]int          // by Run: BatchScheduled, BatchStarted
}

// BatchScheduled implements stream.Listener.
func (c *completions) BatchScheduled(stream.BatchInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sched[c.run]++
}

// BatchStarted implements stream.Listener.
func (c *completions) BatchStarted(stream.BatchInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started[c.run]++
}

// BatchCompleted implements stream.Listener.
func (c *completions) BatchCompleted(b stream.BatchInfo) {
	if b.Err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done[b.Time]++
	c.by[b.Time] = append(c.by[b.Time], c.run)
}

// TestQuietReservedBatchesLeftOut: the reserved times a restart runs
// (see TestTumblingWindowSurvivesCrashRestartBeforeItsTime) that are quiet
// are left out, no output or listener seeing them: an empty batch a crash
// interrupts does not run again, and a second restart, after the first
// crashed, would otherwise run them all again (found by a review).
func TestQuietReservedBatchesLeftOut(t *testing.T) {
	// A Stop instead of the second crash snapshots the state at the last
	// batch, so the third Run runs none of them again.
	for _, how := range []string{"crash"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := &durable{log: recoverylog.NewMemory()}
				c := &completions{done: map[batch.Time]int{}, by: map[batch.Time][]int{}, sched: map[int]int{}, started: map[int]int{}}
				base := batch.Time(time.Now().UnixMilli())
				run := func(i int, crash bool) {
					c.mu.Lock()
					c.run = i
					c.mu.Unlock()
					p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: d.log, Listeners: []stream.Listener{c}})
					if err != nil {
						t.Fatal(err)
					}
					w := stream.Window(stream.From(p, newReplay(t, d)), 10*time.Second, 10*time.Second)
					stream.ForEachBatch(w, func(context.Context, *batch.Batch[string]) error { return nil })
					ctx, cancel := context.WithCancel(t.Context())
					errc := make(chan error, 1)
					go func() { errc <- p.Run(ctx) }()
					time.Sleep(time.Second)
					if crash {
						d.log.Freeze(errors.New("the process died"))
					}
					cancel()
					<-errc
					d.log.Freeze(nil)
				}
				time.Sleep(500 * time.Millisecond)
				run(1, true)           // wall 0.5-1.5 s: batch 1, reserves up to 11 s
				run(2, how == "crash") // wall 1.5-2.5 s: runs 2..11 at once, and 12
				run(3, false)          // wall 2.5 s: runs 3..12 again
				c.mu.Lock()
				defer c.mu.Unlock()
				var twice []string
				for _, bt := range slices.Sorted(maps.Keys(c.done)) {
					if c.done[bt] > 1 {
						twice = append(twice, fmt.Sprintf("%v (runs %v)", bt.Std().Sub(base.Std()), c.by[bt]))
					}
				}
				if len(twice) > 0 {
					t.Errorf("completed empty batches ran their outputs again: %v", twice)
				}
				// Listeners (the metrics' pending gauge) see no batch
				// scheduled that never starts: the last Run drained.
				if c.sched[3] != c.started[3] {
					t.Errorf("the last Run told listeners of %d batches scheduled and %d started", c.sched[3], c.started[3])
				}
			})
		})
	}
}

// TestReservedTimesDoNotDelayTheBatchTimer: a restart queues the reserved
// times it runs into a queue of maxPendingBatches (10). With 100 ms
// batches a restart 2 s before the end of the reservation has 20 of them,
// and waits for the runner, which first recomputes the batch the crash
// left pending (a slow Kinesis read, 3 s). A batch timer made after that
// started at the clock, past the reservation: the batch times in between
// were never cut, and the tumbling window among them (15 s) was output by
// no batch. The timer is now made before the reserved times are queued
// (found by a review).
func TestReservedTimesDoNotDelayTheBatchTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWindowRuns(t, 100*time.Millisecond, 5*time.Second)
		base := batch.Time(time.Now().UnixMilli())
		// Run 1 starts at 4.05 s: batch 4.1 s is empty and reserves up to
		// 14.1 s; r1 is in batch 12.1 s, in whose output the process dies.
		time.Sleep(4050 * time.Millisecond)
		src, end := w.begin(windowRun{dieInFull: true})
		time.Sleep(8 * time.Second)
		src.produce(w.d.record())
		time.Sleep(200 * time.Millisecond)
		end(true)
		// Run 2 starts at once (12.25 s), before the window at 15 s, and
		// recomputes batch 12.1 s for 3 s; it runs 20 s, then drains.
		_, end = w.begin(windowRun{slowRecompute: 3 * time.Second})
		time.Sleep(20 * time.Second)
		end(false)
		w.check(base)
	})
}

// relTimes returns ts, without repeats, as durations after base.
func relTimes(ts []batch.Time, base batch.Time) []time.Duration {
	var out []time.Duration
	for _, t := range slices.Compact(slices.Clone(ts)) {
		out = append(out, t.Std().Sub(base.Std()))
	}
	return out
}

// TestWindowBehindAHeldBatch: a restart that follows a reservation cuts
// its batches ahead of the clock. Its sink is slow on one batch, so the
// timer cuts the window's time (empty: left unlogged for the runner) and a
// later batch with records (logged) while the runner is still on the slow
// batch; the process then dies. The next restart starts before the
// window's time by the clock and must run it, between the pending batches
// (emptyJobs), or the window's records reach no output (found by a
// review).
func TestWindowBehindAHeldBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWindowRuns(t, time.Second, 10*time.Second)
		base := batch.Time(time.Now().UnixMilli()) // a multiple of 10 s
		bt := func(s int) batch.Time { return base.Add(time.Duration(s) * time.Second) }

		// Run 1 (wall 0.5 s - 2.5 s): batch 1 empty (reserves up to 11 s),
		// a record in batch 2, then the process dies.
		time.Sleep(500 * time.Millisecond)
		src, end := w.begin(windowRun{})
		time.Sleep(time.Second)
		src.produce(w.d.record()) // batch 2
		time.Sleep(time.Second)
		end(true)

		// Run 2 (wall 2.5 s): runs the reserved times 3..11 (the window at
		// 10 s outputs r1), then cuts 12, 13, ... ahead of the clock (batch
		// k at wall k-9 s). r2 goes into batch 13, whose output takes 9 s;
		// meanwhile the timer cuts 14..20 (empty) and 21 with r3; the
		// process dies at wall 12.5 s, before the runner leaves batch 13.
		src, end = w.begin(windowRun{slowAt: bt(13), slow: 9 * time.Second})
		time.Sleep(time.Second) // wall 3.5: cut 13 due at 4
		src.produce(w.d.record())
		time.Sleep(8 * time.Second) // wall 11.5: batch 21 is cut at 12
		src.produce(w.d.record())
		time.Sleep(time.Second)
		end(true)

		// Run 3 starts at wall 13.5 s, before the window at 20 s by the
		// clock; it runs 30 s and drains.
		_, end = w.begin(windowRun{})
		time.Sleep(30 * time.Second)
		end(false)
		w.check(base)
	})
}

// TestWindowSecondCrashDuringRecovery is
// TestTumblingWindowSurvivesCrashRestartBeforeItsTime with a second crash
// while the first restart still recomputes the batch the first crash left
// pending (a slow Recompute, as of a Kinesis shard read again). Meanwhile
// that restart's timer has cut its first new batch after the reservation
// and logged a record in it. The third Run starts before the window's
// time by the clock and must run it, before that held batch (emptyJobs),
// or r1 reaches no window output (found by a review).
func TestWindowSecondCrashDuringRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWindowRuns(t, time.Second, 10*time.Second)
		base := batch.Time(time.Now().UnixMilli())
		// Run 1 (wall 0.5 s): batch 1 empty reserves up to 11 s; r1 is in
		// batch 2, in whose output the process dies: batch 2 is pending.
		time.Sleep(500 * time.Millisecond)
		src, end := w.begin(windowRun{dieInFull: true})
		time.Sleep(time.Second)
		src.produce(w.d.record())
		time.Sleep(time.Second)
		end(true)
		// Run 2 (wall 2.5 s): recomputes batch 2 slowly; r2 goes into its
		// first new batch (12 s, cut at wall 3 s); it dies at wall 4.5 s.
		src, end = w.begin(windowRun{slowRecompute: 3 * time.Second})
		time.Sleep(200 * time.Millisecond)
		src.produce(w.d.record())
		time.Sleep(1800 * time.Millisecond)
		end(true)
		// Run 3 starts before the window's time (10 s) and runs 30 s.
		_, end = w.begin(windowRun{})
		time.Sleep(30 * time.Second)
		end(false)
		w.check(base)
	})
}

// windowRuns runs, one after the other, Runs of a pipeline with a
// recovery log and a tumbling window, for the tests of restarts before a
// window's time, and notes what the window's outputs held.
type windowRuns struct {
	t          *testing.T
	d          *durable
	iv, window time.Duration

	mu       sync.Mutex
	windowed map[string]batch.Time // by record, the window that output it
	ran      []batch.Time          // the windows output
}

// newWindowRuns returns the Runs of a pipeline with batches of iv and a
// tumbling window of window.
func newWindowRuns(t *testing.T, iv, window time.Duration) *windowRuns {
	return &windowRuns{t: t, d: &durable{log: recoverylog.NewMemory()}, iv: iv, window: window,
		windowed: map[string]batch.Time{}}
}

// windowRun says how a Run of windowRuns behaves.
type windowRun struct {
	slowRecompute time.Duration // its first Recompute takes that long
	dieInFull     bool          // the process dies in the output of its first batch with records
	slowAt        batch.Time    // the batch whose records' output takes slow
	slow          time.Duration
}

// begin starts a Run as o says; end stops it, by a crash (the log frozen,
// as when the process dies) or a drain.
func (w *windowRuns) begin(o windowRun) (src *replay, end func(crash bool)) {
	t, d := w.t, w.d
	p, err := stream.NewPipeline(stream.Config{BatchInterval: w.iv, Recovery: d.log})
	if err != nil {
		t.Fatal(err)
	}
	src = newReplay(t, d)
	if o.slowRecompute > 0 {
		src.onRecompute = func() { time.Sleep(o.slowRecompute) }
	}
	in := stream.From(p, src)
	ctx, cancel := context.WithCancel(t.Context())
	die := func() {
		d.log.Freeze(errors.New("the process died"))
		cancel()
	}
	stream.ForEachBatch(in, func(ctx context.Context, b *batch.Batch[string]) error {
		switch {
		case o.dieInFull && b.Len() > 0:
			die()
			return ctx.Err()
		case b.Time() == o.slowAt:
			time.Sleep(o.slow)
		}
		return nil
	}, stream.Named("records"))
	stream.ForEachBatch(stream.Window(in, w.window, w.window), func(_ context.Context, b *batch.Batch[string]) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.ran = append(w.ran, b.Time())
		for r := range b.All() {
			w.windowed[r] = b.Time()
		}
		return nil
	}, stream.Named("window"))
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	return src, func(crash bool) {
		if crash {
			die()
			<-errc
			d.log.Freeze(nil)
			return
		}
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		cancel()
	}
}

// check fails the test for each record produced that no window output
// held, naming the windows output, as durations after base.
func (w *windowRuns) check(base batch.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := 1; i <= w.d.n; i++ {
		r := fmt.Sprintf("r%d", i)
		if _, ok := w.windowed[r]; !ok {
			w.t.Errorf("%s reached no window output (windows output at %v, after the test's start)", r, relTimes(w.ran, base))
		}
	}
}
