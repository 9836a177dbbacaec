package kinesis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/lease"
)

// TestStateLoadWaitWarned checks, on a manual clock, that a newly leased
// shard whose state waits for the records of an earlier hold to complete
// is logged at INFO when the wait starts and once at WARN a checkpoint
// interval later, naming the shard, the ranges pending and the fix; before,
// a wait that never ended said nothing above its first INFO, and the shard
// went unread.
func TestStateLoadWaitWarned(t *testing.T) {
	const shard = "shardId-000000000000"
	lr, clk, logs := manualLeaseRun(t) // logs written by acquire only, in this goroutine
	r := lr.rn.r
	lr.state = &stateRun{} // state per shard: a load waits for the shard to settle
	r.progress.started(shard)
	r.progress.adding(shard)
	r.progress.added(batch.SeqRange{Stream: "s", Shard: shard, First: "1", Last: "50", Count: 2})
	c := newControl(t.Context(), lr.rn)
	l := lease.Lease{Shard: shard, Owner: "w"}
	byLevel := func() map[string][]map[string]any { return logLevels(t, logs) }
	lr.acquire(t.Context(), c, l)
	clk.Advance(time.Minute - time.Second)
	lr.acquire(t.Context(), c, l)
	if got := byLevel(); len(got["INFO"]) != 1 || len(got["WARN"]) != 0 {
		t.Fatalf("before a checkpoint interval: %d INFO, %d WARN; want 1 and 0: %v", len(got["INFO"]), len(got["WARN"]), got)
	}
	clk.Advance(time.Second)
	lr.acquire(t.Context(), c, l)
	clk.Advance(time.Minute)
	lr.acquire(t.Context(), c, l)
	got := byLevel()
	if len(got["INFO"]) != 1 || len(got["WARN"]) != 1 {
		t.Fatalf("a checkpoint interval into the wait: %d INFO, %d WARN; want 1 and 1: %v", len(got["INFO"]), len(got["WARN"]), got)
	}
	w := got["WARN"][0]
	if w["shard"] != shard || w["ranges_pending"] != float64(1) || !strings.Contains(fmt.Sprint(w["fix"]), "output") {
		t.Errorf("WARN %v; want the shard, ranges_pending 1 and a fix naming the outputs", w)
	}
	if c.reading(shard) {
		t.Error("the shard is read before the records of its earlier hold completed")
	}
}
