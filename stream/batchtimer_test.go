package stream_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// wallClock is a clock whose wall time is the (virtual, under synctest) time
// minus a lag the test sets, with no monotonic reading: as a machine whose
// clock is behind, or stepped back while it runs, looks to a reader of the
// wall clock. Its timers run on the real (virtual) time.
type wallClock struct {
	mu  sync.Mutex
	lag time.Duration
}

func (c *wallClock) setLag(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lag = d
}

func (c *wallClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(-c.lag).Round(0)
}

func (c *wallClock) NewTimer(d time.Duration) clock.Timer { return clock.Real{}.NewTimer(d) }

func (c *wallClock) NewTicker(d time.Duration) clock.Ticker { return clock.Real{}.NewTicker(d) }

// cutTimes records when (in virtual time since the start) each batch was
// scheduled, and its time.
type cutTimes struct {
	stream.NopListener
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
	times []batch.Time
}

func (c *cutTimes) BatchScheduled(b stream.BatchInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, time.Since(c.start))
	c.times = append(c.times, b.Time)
}

// TestBatchesFollowTheLogWhenTheClockIsBehind restarts a pipeline on a
// clock 20 s behind the last batch time in its recovery log, then steps the
// clock back another 20 s while it runs, and checks, in virtual time, that
// batches are cut an interval apart throughout, with times that are
// multiples of the interval, after the logged one, strictly increasing.
func TestBatchesFollowTheLogWhenTheClockIsBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		const lag = 20 * time.Second
		log := recoverylog.NewMemory()
		last := batch.Time((time.Now().UnixMilli()/iv.Milliseconds() + 1) * iv.Milliseconds())
		l, err := recoverylog.Open(t.Context(), log, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(t.Context(), recoverylog.BatchAllocated(last), recoverylog.BatchCompleted(last)); err != nil {
			t.Fatal(err)
		}
		l.Close()

		clk := &wallClock{lag: lag}
		cuts := &cutTimes{start: time.Now()}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Clock: clk, Recovery: log,
			Listeners: []stream.Listener{cuts}})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[int](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stream.ForEachBatch(stream.From(p, src), func(context.Context, *batch.Batch[int]) error { return nil })
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		time.Sleep(3*iv + iv/2)
		clk.setLag(2 * lag) // a backward step of the wall clock
		time.Sleep(3 * iv)
		// A forward step, to 10 s ahead of the batch times: batches catch
		// up with the wall clock.
		clk.setLag(-10 * time.Second)
		time.Sleep(2 * iv)
		cuts.mu.Lock()
		latest := cuts.times[len(cuts.times)-1]
		cuts.mu.Unlock()
		if behind := clk.Now().Sub(latest.Std()); behind > 2*iv {
			t.Errorf("after a forward step the latest batch time is %v behind the clock, want at most %v", behind, 2*iv)
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}

		cuts.mu.Lock()
		defer cuts.mu.Unlock()
		if len(cuts.times) < 6 {
			t.Fatalf("%d batches cut in %v (cut at %v, times %v), want one an interval",
				len(cuts.times), 6*iv+iv/2, cuts.at, cuts.times)
		}
		prev := last
		for i, bt := range cuts.times {
			if bt <= prev || int64(bt)%iv.Milliseconds() != 0 {
				t.Fatalf("batch %d at time %v after %v: want a multiple of %v after it (times %v)", i, bt, prev, iv, cuts.times)
			}
			prev = bt
		}
		if cuts.times[0] != last.Add(iv) || cuts.at[0] > iv {
			t.Errorf("first batch: time %v cut after %v, want time %v within %v", cuts.times[0], cuts.at[0], last.Add(iv), iv)
		}
		for i := 1; i < 6; i++ {
			if gap := cuts.at[i] - cuts.at[i-1]; gap > iv {
				t.Errorf("batch %d cut %v after batch %d, want at most %v (cut at %v)", i, gap, i-1, iv, cuts.at)
			}
		}
	})
}
