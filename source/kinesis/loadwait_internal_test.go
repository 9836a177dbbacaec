package kinesis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

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

// TestStateFailuresWarnOnce checks that loads of shards' states, and
// stores of their snapshots, failing on many shards (the state table
// unreachable or throttled) are warned about and reported once each, with
// the fix, and their end logged once at INFO when the last shard that
// failed succeeds; before, each shard's failure was a WARN (a load) and a
// reported error (the driver's WARN) at every try. A shard let go while
// it fails ends its part: the next failure warns again.
func TestStateFailuresWarnOnce(t *testing.T) {
	down := errors.New("service unavailable")
	// calls returns, for a lease run, a failed call of the kind tested on
	// a shard, and a call that succeeds.
	type calls func(lr *leaseRun) (fail, ok func(shard string))
	loads := func(lr *leaseRun) (fail, ok func(shard string)) {
		fail = func(shard string) { lr.loadFailed(t.Context(), lease.Lease{Shard: shard, Owner: "w"}, down) }
		return fail, func(shard string) { lr.stateCallOK(&lr.unloaded, shard, "loaded") }
	}
	stores := func(lr *leaseRun) (fail, ok func(shard string)) {
		fail = func(shard string) { lr.stateFailed(shard, down) }
		return fail, func(shard string) { lr.stateCallOK(&lr.unsaved, shard, "stored") }
	}
	for name, calls := range map[string]calls{"loads": loads, "stores": stores} {
		t.Run(name, func(t *testing.T) {
			lr, clk, logs := manualLeaseRun(t)
			lr.state = &stateRun{table: "app.leases-state"}
			reported := 0
			lr.report = func(error) { reported++ }
			fail, ok := calls(lr)
			shard := func(i int) string { return fmt.Sprintf("shardId-%012d", i) }
			const n = 10
			for range 2 { // two tries of every shard
				for i := range n {
					fail(shard(i))
				}
				clk.Advance(time.Minute)
			}
			for i := range n - 1 {
				ok(shard(i))
			}
			got := logLevels(t, logs)
			if len(got["WARN"]) != 1 || reported != 1 || len(got["INFO"]) != 0 {
				t.Fatalf("%d shards failing twice, then all but one succeeding: %d WARN, %d reported, %d INFO; want 1, 1, 0: %v",
					n, len(got["WARN"]), reported, len(got["INFO"]), got)
			}
			if w := got["WARN"][0]; !strings.Contains(fmt.Sprint(w["fix"]), "app.leases-state") {
				t.Errorf("WARN %v: its fix does not name the state table", w)
			}
			ok(shard(n - 1))
			if got := logLevels(t, logs); len(got["INFO"]) != 1 || got["INFO"][0]["failing_for"] != float64(2*time.Minute) {
				t.Fatalf("the last shard succeeded: INFO %v, want one, failing_for 2m0s", got["INFO"])
			}
			fail(shard(0)) // a second outage
			lr.forget(shard(0))
			fail(shard(1)) // a third: shard 0, let go, no longer holds the second open
			if got := logLevels(t, logs); len(got["WARN"]) != 3 || reported != 3 {
				t.Errorf("three outages: %d WARN, %d reported; want 3 and 3", len(got["WARN"]), reported)
			}
		})
	}
}

// TestStateFailureOfOneShardDoesNotHideOutage checks that a shard whose
// state calls fail for a reason of its own does not hide an outage of the
// state table on the other shards: failures are grouped by kind (their
// error code), so the outage is warned about and reported once, and its
// end logged at INFO, while the shard's own failures go on. Before, the
// outage stayed at DEBUG until that shard's call succeeded.
func TestStateFailureOfOneShardDoesNotHideOutage(t *testing.T) {
	own := &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size"}
	down := &smithy.GenericAPIError{Code: "ServiceUnavailable", Message: "down", Fault: smithy.FaultServer}
	lr, clk, logs := manualLeaseRun(t)
	lr.state = &stateRun{table: "app.leases-state"}
	reported := 0
	lr.report = func(error) { reported++ }
	shard := func(i int) string { return fmt.Sprintf("shardId-%012d", i) }
	lr.stateFailed(shard(0), own)
	clk.Advance(time.Minute)
	for range 2 {
		lr.stateFailed(shard(0), own)
		for i := 1; i < 5; i++ {
			lr.stateFailed(shard(i), down)
		}
		clk.Advance(time.Minute)
	}
	got := logLevels(t, logs)
	if len(got["WARN"]) != 2 || reported != 2 {
		t.Fatalf("one shard failing on its own, then an outage of the others: %d WARN, %d reported; want 2 and 2: %v",
			len(got["WARN"]), reported, got)
	}
	if w := got["WARN"][1]; w["kind"] != "ServiceUnavailable" {
		t.Errorf("the outage's WARN %v: want kind ServiceUnavailable", w)
	}
	for i := 1; i < 5; i++ {
		lr.stateCallOK(&lr.unsaved, shard(i), "stored")
	}
	if got := logLevels(t, logs); len(got["INFO"]) != 1 || got["INFO"][0]["failing_for"] != float64(2*time.Minute) {
		t.Fatalf("the outage ended, shard 0 failing on: INFO %v, want one, failing_for 2m0s", got["INFO"])
	}
}
