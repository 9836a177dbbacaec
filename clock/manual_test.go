package clock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// step is one action of a conformance scenario on a clock's timers and
// tickers. Its result, if any, is appended to the scenario's log.
type step struct {
	op   string // "timer", "ticker", "advance", "stop", "reset", "recv"
	name string
	d    time.Duration
}

func newTimer(name string, d time.Duration) step  { return step{"timer", name, d} }
func newTicker(name string, d time.Duration) step { return step{"ticker", name, d} }
func advance(d time.Duration) step                { return step{op: "advance", d: d} }
func stop(name string) step                       { return step{op: "stop", name: name} }
func reset(name string, d time.Duration) step     { return step{"reset", name, d} }
func recv(name string) step                       { return step{op: "recv", name: name} }

// play runs steps on c, with advance moving c's time, and returns what the
// steps observed: the results of Stop and Reset of timers, and for each
// receive the received time as an offset from start, or "none".
func play(c Clock, start time.Time, advance func(time.Duration), steps []step) []string {
	timers, tickers := map[string]Timer{}, map[string]Ticker{}
	var log []string
	for _, s := range steps {
		switch s.op {
		case "timer":
			timers[s.name] = c.NewTimer(s.d)
		case "ticker":
			tickers[s.name] = c.NewTicker(s.d)
		case "advance":
			advance(s.d)
		case "stop":
			if t, ok := timers[s.name]; ok {
				log = append(log, fmt.Sprintf("stop %s: %v", s.name, t.Stop()))
			} else {
				tickers[s.name].Stop()
			}
		case "reset":
			if t, ok := timers[s.name]; ok {
				log = append(log, fmt.Sprintf("reset %s: %v", s.name, t.Reset(s.d)))
			} else {
				tickers[s.name].Reset(s.d)
			}
		case "recv":
			ch := func() <-chan time.Time {
				if t, ok := timers[s.name]; ok {
					return t.C()
				}
				return tickers[s.name].C()
			}()
			select {
			case v := <-ch:
				log = append(log, fmt.Sprintf("recv %s: %v", s.name, v.Sub(start)))
			default:
				log = append(log, fmt.Sprintf("recv %s: none", s.name))
			}
		}
	}
	return log
}

// TestManualMatchesReal plays the same scenarios on Manual and on Real in a
// synctest bubble, where package time's own timers give the expected answers.
func TestManualMatchesReal(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		steps []step
	}{
		{"timer fires once at its deadline", []step{
			newTimer("t", 10*time.Second), advance(9 * time.Second), recv("t"),
			advance(2 * time.Second), recv("t"), recv("t"), stop("t"),
		}},
		{"stop before the deadline", []step{
			newTimer("t", 10*time.Second), stop("t"), advance(20 * time.Second), recv("t"), stop("t"),
		}},
		{"stop after firing, value not received", []step{
			newTimer("t", time.Second), advance(2 * time.Second), stop("t"), recv("t"),
		}},
		{"reset after firing drops the stale value", []step{
			newTimer("t", time.Second), advance(2 * time.Second), reset("t", 5*time.Second), recv("t"),
			advance(4 * time.Second), recv("t"), advance(2 * time.Second), recv("t"),
		}},
		{"reset after the value was received", []step{
			newTimer("t", time.Second), advance(2 * time.Second), recv("t"), reset("t", time.Second),
			advance(1500 * ms), recv("t"),
		}},
		{"reset of an active timer", []step{
			newTimer("t", 10*time.Second), advance(time.Second), reset("t", 2*time.Second),
			advance(2500 * ms), recv("t"), advance(10 * time.Second), recv("t"),
		}},
		{"reset of a stopped timer", []step{
			newTimer("t", time.Second), stop("t"), reset("t", 3*time.Second),
			advance(2 * time.Second), recv("t"), advance(2 * time.Second), recv("t"),
		}},
		{"zero and negative timers fire at once", []step{
			advance(time.Second), newTimer("z", 0), newTimer("n", -time.Second), recv("z"), recv("n"),
		}},
		{"timers fire in deadline order", []step{
			newTimer("late", 3*time.Second), newTimer("early", time.Second), advance(5 * time.Second),
			recv("early"), recv("late"),
		}},
		{"ticker ticks every period", []step{
			newTicker("k", time.Second), advance(1500 * ms), recv("k"), advance(time.Second), recv("k"),
			advance(time.Second), recv("k"),
		}},
		{"ticker drops the ticks a slow receiver misses", []step{
			newTicker("k", time.Second), advance(3500 * ms), recv("k"), recv("k"),
			advance(time.Second), recv("k"),
		}},
		{"ticker stop drops a pending tick", []step{
			newTicker("k", time.Second), advance(1500 * ms), stop("k"), recv("k"),
			advance(5 * time.Second), recv("k"),
		}},
		{"ticker reset restarts the period", []step{
			newTicker("k", time.Second), advance(1500 * ms), reset("k", 2*time.Second), recv("k"),
			advance(1900 * ms), recv("k"), advance(200 * ms), recv("k"), advance(2 * time.Second), recv("k"),
		}},
		{"ticker reset after stop restarts it", []step{
			newTicker("k", time.Second), stop("k"), advance(5 * time.Second), reset("k", time.Second),
			advance(1500 * ms), recv("k"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			synctest.Test(t, func(t *testing.T) {
				want = play(Real{}, time.Now(), time.Sleep, tt.steps)
			})
			m := NewManual(epoch)
			got := play(m, epoch, m.Advance, tt.steps)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Manual differs from package time (-want +got):\n%s", diff)
			}
		})
	}
}

func TestManualSet(t *testing.T) {
	m := NewManual(epoch)
	tm := m.NewTimer(time.Second)
	m.Set(epoch.Add(-time.Hour))
	if got := m.Now(); !got.Equal(epoch) {
		t.Errorf("Set to the past moved the clock to %v, want it left at %v", got, epoch)
	}
	m.Set(epoch.Add(time.Minute))
	if got := <-tm.C(); !got.Equal(epoch.Add(time.Second)) {
		t.Errorf("timer fired with %v, want its deadline %v", got, epoch.Add(time.Second))
	}
	if got := m.Now(); !got.Equal(epoch.Add(time.Minute)) {
		t.Errorf("Now() = %v after Set, want %v", got, epoch.Add(time.Minute))
	}
}

// TestManualConcurrentAdvance checks that Advance reads and moves the clock
// in one step: concurrent advances add up.
func TestManualConcurrentAdvance(t *testing.T) {
	m := NewManual(epoch)
	tk := m.NewTicker(time.Second)
	defer tk.Stop()
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				m.Advance(time.Second)
			}
		})
	}
	wg.Wait()
	if got, want := m.Now(), epoch.Add(goroutines*each*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v: concurrent advances were lost", got, want)
	}
}

func TestManualWaitForWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewManual(epoch)
		fired := make(chan time.Time)
		go func() {
			// The code under test arms its timer some time after starting.
			time.Sleep(time.Hour)
			fired <- <-m.NewTimer(time.Second).C()
		}()
		if err := m.WaitForWaiters(t.Context(), 1); err != nil {
			t.Fatalf("WaitForWaiters: %v", err)
		}
		m.Advance(time.Second)
		if got := <-fired; !got.Equal(epoch.Add(time.Second)) {
			t.Errorf("timer fired at %v, want %v", got, epoch.Add(time.Second))
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := m.WaitForWaiters(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitForWaiters with no timer armed: got %v, want context.DeadlineExceeded", err)
		}
		if err := m.WaitForWaiters(ctx, 0); err != nil {
			t.Errorf("WaitForWaiters(0): %v", err)
		}
	})
}

func TestManualTickerRejectsNonPositiveIntervals(t *testing.T) {
	panics := func(f func()) (p bool) {
		defer func() { p = recover() != nil }()
		f()
		return false
	}
	m := NewManual(epoch)
	if !panics(func() { m.NewTicker(0) }) {
		t.Error("NewTicker(0) did not panic")
	}
	tk := m.NewTicker(time.Second)
	for _, d := range []time.Duration{0, -time.Second} {
		if !panics(func() { tk.Reset(d) }) {
			t.Errorf("Reset(%v) did not panic", d)
		}
	}
	// The ticker still works after the refused resets.
	m.Advance(time.Second)
	if got := <-tk.C(); !got.Equal(epoch.Add(time.Second)) {
		t.Errorf("tick at %v, want %v", got, epoch.Add(time.Second))
	}
}
