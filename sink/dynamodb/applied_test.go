package dynamodb

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/outputid"
	"github.com/weirstream/weir/internal/runname"
)

// failedWrite records, as a failed Write of ctx in batch t does, that it
// applied the write of version v of item "item".
func failedWrite(a *applied, ctx context.Context, t batch.Time, v string) {
	a.end(a.begin(ctx, t), []string{appliedID("item", v)})
}

// TestApplied checks which Write gets the writes applied by the failed
// Writes of an output: those of the same output, Run and batch time only
// (outside a Run, of the same batch time), whatever other Writes succeed
// meanwhile, until the output writes another batch or the Run ends, even
// when the Writes were given contexts that ended sooner.
func TestApplied(t *testing.T) {
	runA, endA := context.WithCancel(runname.With(context.Background()))
	defer endA()
	runA = runname.WithEnd(runA)
	runB := runname.WithEnd(runname.With(context.Background()))
	out1, out2 := outputid.With(runA, 1), outputid.With(runA, 2)
	// The failed Write's own context ends with it (a call's timeout).
	call, cancelCall := context.WithCancel(out1)
	var a applied
	failedWrite(&a, call, 10, "v1")
	cancelCall()
	failedWrite(&a, context.Background(), 10, "outside")
	// Other Writes that succeed: another Run's output 1, another batch
	// outside a Run, and the same output's Write of the batch (another
	// partition's). None forgets what the failed ones applied.
	a.end(a.begin(outputid.With(runB, 1), 10), nil)
	a.end(a.begin(context.Background(), 11), nil)
	a.end(a.begin(out1, 10), nil)
	for _, c := range []struct {
		name    string
		ctx     context.Context
		t       int64
		v       string
		applied bool
	}{
		{"same output, Run and batch", out1, 10, "v1", true},
		{"another output", out2, 10, "v1", false},
		{"another batch", out1, 11, "v1", false},
		{"another Run", outputid.With(runB, 1), 10, "v1", false},
		{"outside a Run, same batch", context.Background(), 10, "outside", true},
		{"outside a Run, a Run's write", context.Background(), 10, "v1", false},
		{"outside a Run, another batch", context.Background(), 12, "outside", false},
	} {
		if got := a.begin(c.ctx, batch.Time(c.t)).has("item", c.v); got != c.applied {
			t.Errorf("%s: applied write seen %v, want %v", c.name, got, c.applied)
		}
	}
	// Two Writes of the batch by the output that fail at once (two
	// partitions') keep the writes of both.
	p1, p2 := a.begin(out1, 10), a.begin(out1, 10)
	a.end(p1, []string{appliedID("item", "p1")})
	a.end(p2, []string{appliedID("item", "p2")})
	if ab := a.begin(out1, 10); !ab.has("item", "v1") || !ab.has("item", "p1") || !ab.has("item", "p2") {
		t.Error("after two failed Writes of the batch at once, one's applied writes are forgotten")
	}
	// The output's Write of the next batch forgets them.
	a.end(a.begin(out1, 11), nil)
	if a.begin(out1, 10).has("item", "v1") {
		t.Error("after a Write of the next batch, the last batch's applied writes are still kept")
	}
	failedWrite(&a, out1, 20, "v3")
	endA()
	a.end(a.begin(context.Background(), 12), nil)
	for k := range a.by {
		if k.run != "" {
			t.Errorf("writes kept of an output of a Run that ended: %+v", k)
		}
	}
}

// TestAppliedOutsideBounded checks that the Writes outside a Run keep
// the applied writes of at most maxOutside batches, the latest.
func TestAppliedOutsideBounded(t *testing.T) {
	var a applied
	for i := range 3 * maxOutside {
		failedWrite(&a, context.Background(), batch.Time(i), "v")
	}
	if len(a.by) != maxOutside {
		t.Errorf("%d batches kept, want %d", len(a.by), maxOutside)
	}
	if !a.begin(context.Background(), batch.Time(3*maxOutside-1)).has("item", "v") {
		t.Error("the latest batch's applied writes are forgotten")
	}
}

// TestAppliedConcurrentWrites ends Writes of one batch time outside a
// Run that failed at once, each having applied writes of its own: every
// one's writes are kept (and go test -race finds no race).
func TestAppliedConcurrentWrites(t *testing.T) {
	var a applied
	ctx := context.Background()
	failedWrite(&a, ctx, 10, "v0")
	var wg sync.WaitGroup
	for i := range 8 {
		ab := a.begin(ctx, 10)
		wg.Go(func() { a.end(ab, []string{appliedID("item", strconv.Itoa(i))}) })
	}
	wg.Wait()
	ab := a.begin(ctx, 10)
	for _, v := range []string{"v0", "0", "7"} {
		if !ab.has("item", v) {
			t.Errorf("the write %s of a failed Write is not kept", v)
		}
	}
}
