package attempt_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
)

func TestWithTimeoutEndsAfterD(t *testing.T) {
	clocks := []struct {
		name string
		clk  func() clock.Clock
	}{
		{"real", func() clock.Clock { return clock.Real{} }},
		{"manual", func() clock.Clock { return clock.NewManual(time.Unix(0, 0)) }},
	}
	for _, c := range clocks {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := c.clk()
				ctx, cancel := attempt.WithTimeout(t.Context(), clk, time.Second)
				defer cancel()
				advance(clk, 999*time.Millisecond)
				synctest.Wait()
				if ctx.Err() != nil || attempt.TimedOut(ctx) {
					t.Fatalf("ended before its timeout: %v", context.Cause(ctx))
				}
				advance(clk, time.Millisecond)
				synctest.Wait()
				if ctx.Err() == nil || !attempt.TimedOut(ctx) {
					t.Fatalf("not timed out after 1s: err %v, cause %v", ctx.Err(), context.Cause(ctx))
				}
				err := attempt.Error(ctx, context.DeadlineExceeded, time.Second)
				if !errors.Is(err, attempt.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Error = %v, want it to wrap ErrTimeout and the cause", err)
				}
			})
		})
	}
}

// advance moves clk forward by d: a Manual clock by hand, the real one in
// the bubble's virtual time.
func advance(clk clock.Clock, d time.Duration) {
	if m, ok := clk.(*clock.Manual); ok {
		m.Advance(d)
		return
	}
	time.Sleep(d)
}

func TestParentCancelIsNotATimeout(t *testing.T) {
	parent, cancelParent := context.WithCancel(t.Context())
	ctx, cancel := attempt.WithTimeout(parent, clock.NewManual(time.Unix(0, 0)), time.Second)
	defer cancel()
	cancelParent()
	<-ctx.Done()
	if attempt.TimedOut(ctx) {
		t.Error("a cancelled parent reads as a timeout")
	}
	if err := attempt.Error(ctx, context.Canceled, time.Second); !errors.Is(err, context.Canceled) || errors.Is(err, attempt.ErrTimeout) {
		t.Errorf("Error = %v, want context.Canceled alone", err)
	}
}

func TestZeroMeansNoTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := attempt.WithTimeout(t.Context(), clock.Real{}, 0)
		defer cancel()
		time.Sleep(time.Hour)
		if ctx.Err() != nil {
			t.Errorf("ended: %v", ctx.Err())
		}
	})
}
