package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Manual is a Clock that only moves when Advance or Set is called: timers and
// tickers fire, in deadline order, as the clock passes their deadlines. It is
// for tests that want to step time explicitly; tests that only need time to
// pass quickly can use Real inside testing/synctest instead.
//
// Its timers and tickers behave as package time's do since Go 1.23: a tick a
// slow receiver cannot take is dropped (the receiver later gets the oldest
// tick it missed), and once Stop or Reset returns, no value from before the
// call is received. Stop and Reset of a timer that fired but whose value was
// not received report true, as the value was still pending.
//
// A Manual is safe for concurrent use. Its zero value is not usable; call
// NewManual.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*manualWaiter // the active ones, and stopped ones not yet dropped
	armed   chan struct{}   // closed and replaced when a timer or ticker is armed
}

// NewManual returns a Manual clock set to now.
func NewManual(now time.Time) *Manual {
	return &Manual{now: now, armed: make(chan struct{})}
}

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

// NewTimer returns a timer that fires when the clock reaches Now()+d; with d
// <= 0 it fires at once.
func (m *Manual) NewTimer(d time.Duration) Timer {
	return m.add(d, 0)
}

// NewTicker returns a ticker that fires every d of clock time. Like
// time.NewTicker, it panics if d <= 0: that is a bug in the caller, not a
// condition to handle.
func (m *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for Manual.NewTicker")
	}
	return manualTicker{m.add(d, d)}
}

func (m *Manual) add(d, period time.Duration) *manualWaiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := &manualWaiter{m: m, c: make(chan time.Time, 1), period: period}
	m.armLocked(w, d)
	return w
}

// armLocked makes w fire d from now, fires it if it is already due, and wakes
// WaitForWaiters.
func (m *Manual) armLocked(w *manualWaiter, d time.Duration) {
	w.when = m.now.Add(d)
	w.active = true
	if !slices.Contains(m.waiters, w) {
		m.waiters = append(m.waiters, w)
	}
	close(m.armed)
	m.armed = make(chan struct{})
	m.fireLocked()
}

// Advance moves the clock forward by d, firing every timer and tick due on
// the way, in deadline order. A negative d does nothing.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(m.now.Add(d))
}

// Set moves the clock to t, firing what falls due; a t before Now() does
// nothing, since the clock never goes backwards.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(t)
}

// setLocked steps the clock from deadline to deadline up to t, so that each
// timer and tick gets the time it was due at.
func (m *Manual) setLocked(t time.Time) {
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

// Waiters returns the number of active timers and tickers.
func (m *Manual) Waiters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waitersLocked()
}

func (m *Manual) waitersLocked() int {
	n := 0
	for _, w := range m.waiters {
		if w.active {
			n++
		}
	}
	return n
}

// WaitForWaiters blocks until at least n timers and tickers are active, or
// ctx is done (it then returns ctx.Err()). A test calls it so that the code
// under test has armed its timer before the test advances the clock, without
// polling Waiters.
func (m *Manual) WaitForWaiters(ctx context.Context, n int) error {
	for {
		m.mu.Lock()
		have, armed := m.waitersLocked(), m.armed
		m.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-armed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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

// fireLocked delivers every waiter due at or before now, earliest first, and
// drops the waiters that are no longer active.
func (m *Manual) fireLocked() {
	slices.SortStableFunc(m.waiters, func(a, b *manualWaiter) int { return a.when.Compare(b.when) })
	kept := m.waiters[:0]
	for _, w := range m.waiters {
		if w.active && !w.when.After(m.now) {
			select {
			case w.c <- m.now:
			default: // a slow receiver misses the tick, as with package time
			}
			if w.period > 0 {
				// Skip the ticks missed while the clock jumped.
				missed := m.now.Sub(w.when)/w.period + 1
				w.when = w.when.Add(missed * w.period)
			} else {
				w.active = false
			}
		}
		if w.active {
			kept = append(kept, w)
		}
	}
	clear(m.waiters[len(kept):])
	m.waiters = kept
}

// drainLocked removes a value sent but not received, and reports whether
// there was one.
func (w *manualWaiter) drainLocked() bool {
	select {
	case <-w.c:
		return true
	default:
		return false
	}
}

func (w *manualWaiter) C() <-chan time.Time { return w.c }

// Stop deactivates the timer and discards a value not yet received. It
// reports whether the timer was active or its value still pending.
func (w *manualWaiter) Stop() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	was := w.active
	w.active = false
	return w.drainLocked() || was
}

// Reset discards a value not yet received and makes the timer fire d from
// now. It reports what Stop would have.
func (w *manualWaiter) Reset(d time.Duration) bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	was := w.drainLocked() || w.active
	w.m.armLocked(w, d)
	return was
}

type manualTicker struct{ w *manualWaiter }

func (t manualTicker) C() <-chan time.Time { return t.w.c }

// Stop turns the ticker off and discards a tick not yet received.
func (t manualTicker) Stop() { t.w.Stop() }

// Reset changes the interval to d, discards a tick not yet received, and
// makes the next tick come d from now. Like time.Ticker.Reset, it panics if
// d <= 0.
func (t manualTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Manual ticker Reset")
	}
	t.w.m.mu.Lock()
	defer t.w.m.mu.Unlock()
	t.w.drainLocked()
	t.w.period = d
	t.w.m.armLocked(t.w, d)
}
