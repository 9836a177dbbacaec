package recovery_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/recovery/recoverytest"
)

// TestRecoverSnapshot checks which completed batches a snapshot keeps for
// replay: those after it, with their blocks, empty ones included; none
// without a snapshot.
func TestRecoverSnapshot(t *testing.T) {
	st, err := recovery.Recover(recoverytest.StateHistory("r"))
	if err != nil {
		t.Fatal(err)
	}
	want := []recovery.PendingBatch{
		{Time: 2000, Blocks: []batch.BlockInfo{info(0, 1)}},
		{Time: 3000, Blocks: []batch.BlockInfo{info(1, 0)}},
	}
	if diff := cmp.Diff(want, st.Replay); diff != "" {
		t.Errorf("Replay (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&recovery.SnapshotRef{Time: 1000, Ref: "r"}, st.Snapshot); diff != "" {
		t.Errorf("Snapshot (-want +got):\n%s", diff)
	}
	if len(st.Pending) != 1 || st.Pending[0].Time != 4000 {
		t.Errorf("Pending = %v, want batch 4000", st.Pending)
	}
	// The compacted log recovers to the same state.
	again, err := recovery.Recover(st.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, again, recoverytest.EquateEmpty()); diff != "" {
		t.Errorf("State of Entries() (-want +got):\n%s", diff)
	}

	empty, err := recovery.Recover([]recovery.Entry{
		recovery.SnapshotTaken(0, ""),
		recovery.BatchAllocated(1000), recovery.BatchCompleted(1000),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(empty.Replay) != 1 || empty.Replay[0].Time != 1000 {
		t.Errorf("an empty completed batch after the snapshot: Replay = %v, want batch 1000", empty.Replay)
	}

	none, err := recovery.Recover(recoverytest.History())
	if err != nil {
		t.Fatal(err)
	}
	if none.Snapshot != nil || len(none.Replay) > 0 {
		t.Errorf("a log without snapshot: Snapshot %v, Replay %v; want none", none.Snapshot, none.Replay)
	}

	_, err = recovery.Recover([]recovery.Entry{recovery.SnapshotTaken(2000, "b"), recovery.SnapshotTaken(1000, "a")})
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
	histories := map[string][]recovery.Entry{
		"without state": recoverytest.History(),
		"with state":    recoverytest.StateHistory("r"),
		"empty batch kept for replay, a block after the last snapshot": {
			recovery.SnapshotTaken(0, ""),
			block(0, 0), recovery.BatchAllocated(1000, id(0, 0)), recovery.BatchCompleted(1000),
			recovery.SnapshotTaken(1000, "a"),
			recovery.BatchAllocated(2000), recovery.BatchCompleted(2000),
			block(0, 1), block(1, 0), recovery.BatchAllocated(3000, id(1, 0), id(0, 1)), recovery.BatchCompleted(3000),
			block(0, 2),
		},
	}
	for name, h := range histories {
		t.Run(name, func(t *testing.T) {
			want, err := recovery.Recover(h)
			if err != nil {
				t.Fatal(err)
			}
			copies := want.Entries()
			for n := range len(copies) + 1 {
				log := append(slices.Clone(h), copies[:n]...)
				got, err := recovery.Recover(log)
				if err != nil {
					t.Fatalf("the log and %d of its %d compacted entries: %v", n, len(copies), err)
				}
				if diff := cmp.Diff(want, got, recoverytest.EquateEmpty()); diff != "" {
					t.Fatalf("the log and %d of its %d compacted entries: State (-want +got):\n%s", n, len(copies), diff)
				}
				// A restart appends on to such a log and compacts it later.
				if again, err := recovery.Recover(got.Entries()); err != nil {
					t.Fatalf("Recover(Entries()) of the log and %d compacted entries: %v", n, err)
				} else if diff := cmp.Diff(want, again, recoverytest.EquateEmpty()); diff != "" {
					t.Fatalf("State of Entries() (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestDirSnapshotTorn checks that a snapshot.tmp a crash tore is removed at
// open and leaves the current snapshot readable, and that a damaged
// snapshot file is a *CorruptError.
func TestDirSnapshotTorn(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	l, err := recovery.OpenDir(ctx, recovery.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := l.PutSnapshot(ctx, 1000, []byte("state at 1000"))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, recovery.SnapshotTaken(1000, ref))
	l.Close()
	// A crash in the middle of writing the next snapshot, in this version
	// (a temporary file of a fresh name) and in an earlier one.
	temps := []string{
		filepath.Join(dir, ".tmp-snapshot-00000000000000002000.snap.0123456789abcdef"),
		filepath.Join(dir, "snapshot.tmp"),
	}
	for _, tmp := range temps {
		if err := os.WriteFile(tmp, []byte("weirsnp1\x00\x01"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err = recovery.OpenDir(ctx, recovery.Dir(dir))
	if err != nil {
		t.Fatalf("open after a torn snapshot: %v", err)
	}
	defer l.Close()
	for _, tmp := range temps {
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after open: %v", filepath.Base(tmp), err)
		}
	}
	got, err := l.GetSnapshot(ctx, ref)
	if err != nil || string(got) != "state at 1000" {
		t.Fatalf("GetSnapshot = %q, %v; want the snapshot at 1000", got, err)
	}
	// Damage the snapshot file.
	path := filepath.Join(dir, ref)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var ce *recovery.CorruptError
	if _, err := l.GetSnapshot(ctx, ref); !errors.As(err, &ce) || ce.Path != path {
		t.Errorf("GetSnapshot of a damaged file: got %v, want a *CorruptError naming %s", err, path)
	}
	if _, err := l.GetSnapshot(ctx, "../LOCK"); !errors.Is(err, recovery.ErrNoSnapshot) {
		t.Errorf("GetSnapshot of a name that is not a snapshot's: got %v, want ErrNoSnapshot", err)
	}
}
