package backoff_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
)

func TestNextGrowsWithinJitterAndCap(t *testing.T) {
	p := backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second}
	for range 200 {
		b := p.Start()
		want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
		for i, hi := range want {
			hi *= time.Millisecond
			got := b.Next()
			if got < hi/2 || got > hi {
				t.Fatalf("wait %d = %v, want in [%v, %v]", i, got, hi/2, hi)
			}
		}
		if b.Attempts() != len(want) {
			t.Fatalf("Attempts = %d, want %d", b.Attempts(), len(want))
		}
		b.Reset()
		if got := b.Next(); got > 100*time.Millisecond {
			t.Fatalf("after Reset: %v, want <= 100ms", got)
		}
	}
}

func TestMaxBelowBaseMeansBase(t *testing.T) {
	b := backoff.Policy{Base: time.Second}.Start()
	for range 10 {
		if got := b.Next(); got < 500*time.Millisecond || got > time.Second {
			t.Fatalf("wait %v, want in [500ms, 1s]", got)
		}
	}
}

func TestJitterSmall(t *testing.T) {
	for _, d := range []time.Duration{0, 1} {
		if got := backoff.Jitter(d); got != d {
			t.Errorf("Jitter(%v) = %v", d, got)
		}
	}
}

func TestWaitUsesClockAndContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := backoff.Policy{Base: time.Second, Max: time.Second}.Start()
		start := time.Now()
		if err := b.Wait(t.Context(), clock.Real{}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 500*time.Millisecond || d > time.Second {
			t.Fatalf("waited %v, want in [500ms, 1s]", d)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.Wait(ctx, clock.Real{}); err != context.Canceled {
			t.Fatalf("Wait on a cancelled ctx = %v, want context.Canceled", err)
		}
	})
}
