package recoverylog_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
)

// TestRecoverSnapshot checks which completed batches a snapshot keeps for
// replay: those after it, with their blocks, empty ones included; none
// without a snapshot.
func TestRecoverSnapshot(t *testing.T) {
	st, err := recoverylog.Recover(logtest.StateHistory("r"))
	if err != nil {
		t.Fatal(err)
	}
	want := []recoverylog.PendingBatch{
		{Time: 2000, Blocks: []batch.BlockInfo{info(0, 1)}},
		{Time: 3000, Blocks: []batch.BlockInfo{info(1, 0)}},
	}
	if diff := cmp.Diff(want, st.Replay); diff != "" {
		t.Errorf("Replay (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&recoverylog.SnapshotRef{Time: 1000, Ref: "r"}, st.Snapshot); diff != "" {
		t.Errorf("Snapshot (-want +got):\n%s", diff)
	}
	if len(st.Pending) != 1 || st.Pending[0].Time != 4000 {
		t.Errorf("Pending = %v, want batch 4000", st.Pending)
	}
	// The compacted log recovers to the same state.
	again, err := recoverylog.Recover(st.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, again, logtest.EquateEmpty()); diff != "" {
		t.Errorf("State of Entries() (-want +got):\n%s", diff)
	}

	empty, err := recoverylog.Recover([]recoverylog.Entry{
		recoverylog.SnapshotTaken(0, ""),
		recoverylog.BatchAllocated(1000), recoverylog.BatchCompleted(1000),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(empty.Replay) != 1 || empty.Replay[0].Time != 1000 {
		t.Errorf("an empty completed batch after the snapshot: Replay = %v, want batch 1000", empty.Replay)
	}

	none, err := recoverylog.Recover(logtest.History())
	if err != nil {
		t.Fatal(err)
	}
	if none.Snapshot != nil || len(none.Replay) > 0 {
		t.Errorf("a log without snapshot: Snapshot %v, Replay %v; want none", none.Snapshot, none.Replay)
	}

	_, err = recoverylog.Recover([]recoverylog.Entry{recoverylog.SnapshotTaken(2000, "b"), recoverylog.SnapshotTaken(1000, "a")})
	if !errors.Is(err, recovery.ErrInconsistent) {
		t.Errorf("a snapshot older than the current one: got %v, want ErrInconsistent", err)
	}
}

// TestRecoverInterruptedCompaction checks that a log followed by any prefix
// of its compacted entries, as a DynamoDB log keeps them when a crash cuts
// its compaction short (copies written, no base item yet), recovers to the
// same State: with a snapshot, the copies hold again the blocks, allocation
// and completion of each batch kept for replay, which completed in the
// entries before them.
func TestRecoverInterruptedCompaction(t *testing.T) {
	histories := map[string][]recoverylog.Entry{
		"without state":                     logtest.History(),
		"with state":                        logtest.StateHistory("r"),
		"runs of empty batches":             append(runHistory(), recoverylog.EmptyRun(3400, 13400, 5*time.Second), blockIn(0, 2, 8400)),
		"a run completed by reserved times": append(runHistory(), recoverylog.BatchesReservedFrom(3400, 13400)),
		"empty batch kept for replay, a block after the last snapshot": {
			recoverylog.SnapshotTaken(0, ""),
			block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)), recoverylog.BatchCompleted(1000),
			recoverylog.SnapshotTaken(1000, "a"),
			recoverylog.BatchAllocated(2000), recoverylog.BatchCompleted(2000),
			block(0, 1), block(1, 0), recoverylog.BatchAllocated(3000, id(1, 0), id(0, 1)), recoverylog.BatchCompleted(3000),
			block(0, 2),
		},
	}
	for name, h := range histories {
		t.Run(name, func(t *testing.T) {
			want, err := recoverylog.Recover(h)
			if err != nil {
				t.Fatal(err)
			}
			copies := want.Entries()
			for n := range len(copies) + 1 {
				log := append(slices.Clone(h), copies[:n]...)
				got, err := recoverylog.Recover(log)
				if err != nil {
					t.Fatalf("the log and %d of its %d compacted entries: %v", n, len(copies), err)
				}
				if diff := cmp.Diff(want, got, logtest.EquateEmpty()); diff != "" {
					t.Fatalf("the log and %d of its %d compacted entries: State (-want +got):\n%s", n, len(copies), diff)
				}
				// A restart appends on to such a log and compacts it later.
				if again, err := recoverylog.Recover(got.Entries()); err != nil {
					t.Fatalf("Recover(Entries()) of the log and %d compacted entries: %v", n, err)
				} else if diff := cmp.Diff(want, again, logtest.EquateEmpty()); diff != "" {
					t.Fatalf("State of Entries() (-want +got):\n%s", diff)
				}
			}
		})
	}
}
