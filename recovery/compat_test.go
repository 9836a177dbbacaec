package recovery_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
)

// TestDirReadsV020 opens directory logs written by weir v0.2.0 (made by its
// recovery package: History appended in 400-byte segments, compacted, then
// two more entries; and StateHistory with a snapshot) and checks that they
// read as written: the formats of segments, entries and snapshots are
// unchanged.
func TestDirReadsV020(t *testing.T) {
	t.Run("compacted", func(t *testing.T) {
		st, err := recoverylog.Recover(logtest.History())
		if err != nil {
			t.Fatal(err)
		}
		want := append(st.Entries(), recoverylog.BatchCompleted(3000), logtest.Block(1, 2))
		l := openDir(t, recovery.Dir(copyDir(t, "testdata/v0.2.0/plain")))
		logtest.Check(t, l, want)
	})
	t.Run("state", func(t *testing.T) {
		l := openDir(t, recovery.Dir(copyDir(t, "testdata/v0.2.0/state")))
		st, err := recoverylog.Load(t.Context(), l)
		if err != nil {
			t.Fatal(err)
		}
		want, err := recoverylog.Recover(logtest.StateHistory("snapshot-00000000000000001000.snap"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, st, logtest.EquateEmpty()); diff != "" {
			t.Fatalf("State (-want +got):\n%s", diff)
		}
		data, err := l.GetSnapshot(t.Context(), *st.Snapshot)
		if err != nil || string(data) != "state at 1000" {
			t.Fatalf("GetSnapshot = %q, %v; want the snapshot v0.2.0 stored", data, err)
		}
	})
}
