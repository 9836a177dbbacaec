package clock

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Manual is a Clock that only moves when Advance or Set is called: timers and
// tickers fire, in time order, as the clock passes their deadlines. It is for
// tests that want to step time explicitly; tests that only need time to pass
// quickly can use Real inside testing/synctest instead.
//
// A Manual is safe for concurrent use. Its zero value is not usable; call
// NewManual.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*manualWaiter
}

// NewManual returns a Manual clock set to now.
func NewManual(now time.Time) *Manual { return &Manual{now: now} }

type manualWaiter struct {
	m      *Manual
	c      chan time.Time
	when   time.Time
	period time.Duration // 0 for a timer
	active bool
}

// Now returns the clock's current time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d.
func (m *Manual) NewTimer(d time.Duration) Timer {
	return m.add(d, 0)
}

// NewTicker returns a ticker that fires every d of clock time. Like
// time.Ticker, it drops ticks a slow receiver cannot take.
func (m *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	return manualTicker{m.add(d, d)}
}

func (m *Manual) add(d, period time.Duration) *manualWaiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := &manualWaiter{m: m, c: make(chan time.Time, 1), when: m.now.Add(d), period: period, active: true}
	m.waiters = append(m.waiters, w)
	m.fireLocked()
	return w
}

// Advance moves the clock forward by d, firing every timer and tick due on the
// way, in deadline order.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	target := m.now.Add(d)
	m.mu.Unlock()
	m.Set(target)
}

// Set moves the clock to t (never backwards), firing what falls due.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		next := m.nextLocked()
		if next == nil || next.when.After(t) {
			break
		}
		if next.when.After(m.now) {
			m.now = next.when
		}
		m.fireLocked()
	}
	if t.After(m.now) {
		m.now = t
	}
}

// Waiters returns the number of active timers and tickers: a test can wait
// for the code under test to arm its timer before advancing.
func (m *Manual) Waiters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, w := range m.waiters {
		if w.active {
			n++
		}
	}
	return n
}

func (m *Manual) nextLocked() *manualWaiter {
	var next *manualWaiter
	for _, w := range m.waiters {
		if w.active && (next == nil || w.when.Before(next.when)) {
			next = w
		}
	}
	return next
}

// fireLocked delivers every waiter due at or before now.
func (m *Manual) fireLocked() {
	sort.SliceStable(m.waiters, func(i, j int) bool { return m.waiters[i].when.Before(m.waiters[j].when) })
	kept := m.waiters[:0]
	for _, w := range m.waiters {
		if w.active && !w.when.After(m.now) {
			select {
			case w.c <- m.now:
			default: // a slow receiver misses the tick, as with package time
			}
			if w.period > 0 {
				for !w.when.After(m.now) {
					w.when = w.when.Add(w.period)
				}
			} else {
				w.active = false
			}
		}
		if w.active {
			kept = append(kept, w)
		}
	}
	m.waiters = kept
}

func (w *manualWaiter) C() <-chan time.Time { return w.c }

func (w *manualWaiter) Stop() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	was := w.active
	w.active = false
	return was
}

func (w *manualWaiter) Reset(d time.Duration) bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	was := w.active
	w.when = w.m.now.Add(d)
	if w.period > 0 {
		w.period = d
	}
	w.active = true
	if !slices.Contains(w.m.waiters, w) {
		w.m.waiters = append(w.m.waiters, w)
	}
	w.m.fireLocked()
	return was
}

type manualTicker struct{ w *manualWaiter }

func (t manualTicker) C() <-chan time.Time   { return t.w.c }
func (t manualTicker) Stop()                 { t.w.Stop() }
func (t manualTicker) Reset(d time.Duration) { t.w.Reset(d) }
