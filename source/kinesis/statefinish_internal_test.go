package kinesis

import (
	"context"
	"errors"
	"testing"

	"github.com/weirstream/weir/internal/checkpointer"
)

// TestStateStoreFailureEndsWhenShardFinishes: a shard whose snapshot store
// failed (the state table down as it ended) and whose last snapshot then
// stores, so that it finishes (SHARD_END), ends its part of the run of
// failed stores: the end is logged at INFO, and the next outage is warned
// about and reported again. Before, finishing left it in the run for good,
// and every later failure to store was logged at DEBUG alone.
func TestStateStoreFailureEndsWhenShardFinishes(t *testing.T) {
	const shard, other = "shardId-000000000000", "shardId-000000000001"
	lr, _, logs := manualLeaseRun(t)
	lr.rn.r.lease.Store(lr)
	lr.state = &stateRun{table: "app.leases-state", store: nopStore{}, held: map[string]*heldState{}}
	reported := 0
	lr.report = func(error) { reported++ }
	// Its lease holds SHARD_END already: marking it calls no lease table.
	noCall := checkpointer.CommitterFunc(func(context.Context, string, string) error { return errors.New("no call expected") })
	if err := lr.cp.Register(shard, noCall, checkpointer.ShardEnd); err != nil {
		t.Fatal(err)
	}
	drainShard(t, lr, shard, true)

	lr.stateFailed(shard, errors.New("service unavailable")) // its last snapshot, the table down
	lr.finishEnded(t.Context())                              // stored now, and marked SHARD_END
	lr.mu.Lock()
	finished := !lr.owned[shard]
	lr.mu.Unlock()
	if !finished {
		t.Fatalf("the shard is not finished; the test needs it: %v", logLevels(t, logs))
	}
	if got := logLevels(t, logs)["INFO"]; !hasMsg(got, "kinesis: shard states are stored again") {
		t.Errorf("INFO %v: want the end of the failed stores", got)
	}
	lr.stateFailed(other, errors.New("service unavailable")) // a later outage
	if w := logLevels(t, logs)["WARN"]; len(w) != 2 || reported != 2 {
		t.Errorf("two outages of the state table: %d WARN, %d reported; want 2 and 2", len(w), reported)
	}
}

// hasMsg reports whether one of the log records has the message msg.
func hasMsg(recs []map[string]any, msg string) bool {
	for _, m := range recs {
		if m["msg"] == msg {
			return true
		}
	}
	return false
}
