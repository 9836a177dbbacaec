package attempt_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
)

// BenchmarkWithTimeout measures what bounding one attempt costs, against
// the context.WithCancel every call would make anyway as a baseline.
func BenchmarkWithTimeout(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline=WithCancel", func(b *testing.B) {
		for b.Loop() {
			_, cancel := context.WithCancel(ctx)
			cancel()
		}
	})
	b.Run("real", func(b *testing.B) {
		for b.Loop() {
			_, cancel := attempt.WithTimeout(ctx, clock.Real{}, 10*time.Second)
			cancel()
		}
	})
	b.Run("manual", func(b *testing.B) {
		clk := clock.NewManual(time.Unix(0, 0))
		for b.Loop() {
			_, cancel := attempt.WithTimeout(ctx, clk, 10*time.Second)
			cancel()
		}
	})
}
