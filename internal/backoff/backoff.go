// Package backoff is weir's one retry back-off: exponential, jittered,
// capped, and timed on an injected clock, so that every retry loop (block
// pushes, Kinesis calls, checkpoint commits, lease and recovery-log writes)
// waits the same way and runs in virtual time in tests.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/weirstream/weir/clock"
)

// Policy is an exponential back-off: the n-th wait (from 0) is a uniformly
// random duration in [d/2, d], where d = Base*2^n capped at Max. The jitter
// keeps workers that failed together from retrying together.
type Policy struct {
	// Base is the first wait's upper bound; it must be > 0.
	Base time.Duration
	// Max caps every wait; a Max below Base means Base.
	Max time.Duration
}

// Start returns the state of a new retry sequence under p.
func (p Policy) Start() *Backoff { return &Backoff{p: p} }

// Backoff is one retry sequence: it counts the waits taken. It is not safe
// for concurrent use; each retry loop makes its own with Policy.Start.
type Backoff struct {
	p       Policy
	attempt int
}

// Attempts returns the number of waits taken so far.
func (b *Backoff) Attempts() int { return b.attempt }

// Reset starts the sequence again from the first wait.
func (b *Backoff) Reset() { b.attempt = 0 }

// Next returns the next wait and counts it.
func (b *Backoff) Next() time.Duration {
	d := b.p.Base
	ceiling := max(b.p.Max, b.p.Base)
	for i := 0; i < b.attempt && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	b.attempt++
	return Jitter(d)
}

// Wait sleeps the next wait on clk, or until ctx is done (then it returns
// ctx's error).
func (b *Backoff) Wait(ctx context.Context, clk clock.Clock) error {
	return clock.Sleep(ctx, clk, b.Next())
}

// Jitter returns a uniformly random duration in [d/2, d] (d itself when d
// is at most 1ns).
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
