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
	ab := a.begin(ctx, t)
	ab.add("item", v)
	a.end(ab, true)
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
	a.end(a.begin(outputid.With(runB, 1), 10), false)
	a.end(a.begin(context.Background(), 11), false)
	a.end(a.begin(out1, 10), false)
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
	p1.add("item", "p1")
	p2.add("item", "p2")
	a.end(p1, true)
	a.end(p2, true)
	if ab := a.begin(out1, 10); !ab.has("item", "v1") || !ab.has("item", "p1") || !ab.has("item", "p2") {
		t.Error("after two failed Writes of the batch at once, one's applied writes are forgotten")
	}
	// The output's Write of the next batch forgets them.
	a.end(a.begin(out1, 11), false)
	if a.begin(out1, 10).has("item", "v1") {
		t.Error("after a Write of the next batch, the last batch's applied writes are still kept")
	}
	failedWrite(&a, out1, 20, "v3")
	endA()
	a.end(a.begin(context.Background(), 12), false)
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

// TestAppliedConcurrentWrites runs two Writes of one batch time outside a
// Run at once, one adding what it applies while the other ends (found by
// go test -race when they shared one set).
func TestAppliedConcurrentWrites(t *testing.T) {
	var a applied
	ctx := context.Background()
	failedWrite(&a, ctx, 10, "v0")
	g1, g2 := a.begin(ctx, 10), a.begin(ctx, 10)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 1000 {
			g1.add("item", strconv.Itoa(i))
		}
	})
	for range 100 {
		a.end(g2, true)
	}
	wg.Wait()
	a.end(g1, true)
	if ab := a.begin(ctx, 10); !ab.has("item", "v0") || !ab.has("item", "999") {
		t.Error("the writes of the failed Writes are not all kept")
	}
}
