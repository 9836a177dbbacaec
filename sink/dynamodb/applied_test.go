package dynamodb

import (
	"context"
	"testing"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/outputid"
	"github.com/weirstream/weir/internal/runname"
)

// TestApplied checks which Write gets the writes applied by the last
// failed Write of an output: the next of the same output, Run and batch
// time only, and none after a Write that succeeded.
func TestApplied(t *testing.T) {
	runA, runB := runname.With(context.Background()), runname.With(context.Background())
	out1, out2 := outputid.With(runA, 1), outputid.With(runA, 2)
	var a applied
	failed := a.begin(out1, 10)
	failed.add("item", "v1")
	a.end(out1, failed, true)
	for _, c := range []struct {
		name string
		ctx  context.Context
		t    int64
		want bool
	}{
		{"same output, Run and batch", out1, 10, true},
		{"another output", out2, 10, false},
		{"another batch", out1, 11, false},
		{"another Run", outputid.With(runB, 1), 10, false},
		{"outside a Run", context.Background(), 10, false},
	} {
		if got := a.begin(c.ctx, batch.Time(c.t)).has("item", "v1"); got != c.want {
			t.Errorf("%s: applied write seen %v, want %v", c.name, got, c.want)
		}
	}
	again := a.begin(out1, 10)
	again.add("item", "v2")
	a.end(out1, again, false)
	if a.begin(out1, 10).has("item", "v1") {
		t.Error("after a Write that succeeded, its batch's applied writes are still remembered")
	}
	if len(a.by) != 0 {
		t.Errorf("%d outputs' writes remembered after the Write that succeeded, want 0", len(a.by))
	}
}
