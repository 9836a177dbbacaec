// Package attempt bounds one attempt of an AWS call in time, on an injected
// clock, so that a silent connection cannot stall a shard reader, a lease
// renewal or a recovery-log write, and tests run the timeout in virtual time.
package attempt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/clock"
)

// ErrTimeout is the cause (context.Cause) of a context ended by WithTimeout
// or WithDeadline: the attempt took too long, its parent is still alive.
var ErrTimeout = errors.New("attempt timed out")

// WithTimeout returns a child of ctx that ends d after now on clk, with
// cause ErrTimeout, and a function that releases it (call it once the
// attempt returned). d <= 0 means no timeout.
func WithTimeout(ctx context.Context, clk clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	if _, real := clk.(clock.Real); real || clk == nil {
		// The runtime's timers: no goroutine, and virtual under synctest.
		return context.WithTimeoutCause(ctx, d, ErrTimeout)
	}
	child, cancel := context.WithCancelCause(ctx)
	t := clk.NewTimer(d)
	exited := make(chan struct{})
	go func() { // owned by the returned function, which waits for it
		defer close(exited)
		select {
		case <-t.C():
			cancel(ErrTimeout)
		case <-child.Done():
		}
	}()
	return child, func() {
		t.Stop()
		cancel(context.Canceled)
		<-exited
	}
}

// TimedOut reports whether ctx ended because its own timeout expired (see
// WithTimeout), rather than because its parent ended.
func TimedOut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrTimeout)
}

// Error returns err, or an error saying the attempt timed out after d when
// ctx timed out (see TimedOut): the SDK reports a cancelled request, which
// would read as if the caller gave up. The result wraps both err and
// ErrTimeout.
func Error(ctx context.Context, err error, d time.Duration) error {
	if err == nil || !TimedOut(ctx) {
		return err
	}
	return fmt.Errorf("no answer within %v (%w): %w", d, ErrTimeout, err)
}
