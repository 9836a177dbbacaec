// Package clock is the time source weir's time-driven parts take: the driver's
// batch timer, the block generator's seal timer, the checkpointer's interval,
// and back-off waits. Production code uses Real; tests use testing/synctest
// with Real (virtual time) or a Manual clock they advance by hand.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, after d.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that fires every d; d must be > 0.
	NewTicker(d time.Duration) Ticker
}

// Timer is a one-shot timer made by a Clock. It follows the semantics of
// time.Timer since Go 1.23: once Stop or Reset returns, no value from before
// the call is received from C, so callers need not drain C themselves.
type Timer interface {
	// C returns the channel the timer's time is delivered on.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it did so: false
	// if the timer had already been stopped, or had fired and its value had
	// been received.
	Stop() bool
	// Reset makes the timer fire d from now, discarding a value not yet
	// received; it reports what Stop would have.
	Reset(d time.Duration) bool
}

// Ticker delivers the time on its channel at an interval. A tick the
// receiver is not ready for is dropped, as with time.Ticker.
type Ticker interface {
	// C returns the channel the ticks are delivered on.
	C() <-chan time.Time
	// Stop turns the ticker off; a tick not yet received is discarded.
	Stop()
	// Reset changes the interval to d (which must be > 0) and restarts the
	// period: the next tick comes d from now.
	Reset(d time.Duration)
}

// Real is the wall clock, backed by package time. Under testing/synctest it
// runs in the bubble's virtual time.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTicker returns a time.Ticker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Stop()                 { t.t.Stop() }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }

// Or returns c, or Real if c is nil: the default for a Config's Clock field.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Sleep waits for d on c, or until ctx is done, whichever is first; it returns
// ctx.Err() in the second case.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
