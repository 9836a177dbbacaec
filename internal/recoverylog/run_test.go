package recoverylog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
)

// runHistory is the log of a stateful pipeline with a 200 ms interval that
// went idle after its batch at 1000 (snapshot at 1000), wrote a run of empty
// batches from 1200 through 3200, completed a batch with a block at 2000 in
// it, and crashed in the batch at 2400 or so.
func runHistory() []recoverylog.Entry {
	return []recoverylog.Entry{
		recoverylog.SnapshotTaken(0, ""),
		blockIn(0, 0, 1000), recoverylog.BatchCompleted(1000),
		recoverylog.SnapshotTaken(1000, "a"),
		recoverylog.EmptyRun(1200, 3200, 200*time.Millisecond),
		blockIn(0, 1, 2000), recoverylog.BatchCompleted(2000),
	}
}

// times returns the times of batches, and which are empty batches of a run.
func times(bs []recoverylog.PendingBatch) (ts []batch.Time, inRun []bool) {
	for _, b := range bs {
		ts = append(ts, b.Time)
		inRun = append(inRun, b.InRun)
	}
	return ts, inRun
}

// TestRecoverEmptyRun checks what a restart makes of a run of empty
// batches: those up to the last completion, after the snapshot, are replayed
// for the state among the batches with blocks, in time order; the others
// are pending, to run again with their outputs, the one a crash
// interrupted among them; the run's times are reserved.
func TestRecoverEmptyRun(t *testing.T) {
	st, err := recoverylog.Recover(runHistory())
	if err != nil {
		t.Fatal(err)
	}
	rt, rin := times(st.Replay)
	if diff := cmp.Diff([]batch.Time{1200, 1400, 1600, 1800, 2000}, rt); diff != "" {
		t.Errorf("Replay times (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true, true, true, true, false}, rin); diff != "" {
		t.Errorf("Replay InRun (-want +got):\n%s", diff)
	}
	if len(st.Replay[4].Blocks) != 1 {
		t.Errorf("the batch at 2000 replays with %v, want its block", st.Replay[4].Blocks)
	}
	pt, pin := times(st.Pending)
	if diff := cmp.Diff([]batch.Time{2200, 2400, 2600, 2800, 3000, 3200}, pt); diff != "" {
		t.Errorf("Pending times (-want +got):\n%s", diff)
	}
	for i, in := range pin {
		if !in || len(st.Pending[i].Blocks) != 0 {
			t.Errorf("pending batch %v: InRun %v, blocks %v; want an empty batch of the run", pt[i], in, st.Pending[i].Blocks)
		}
	}
	if last, ok := st.LastBatch(); !ok || last != 3200 || st.ReservedThrough != 3200 {
		t.Errorf("LastBatch %v %v, ReservedThrough %v; want the run's end, 3200", last, ok, st.ReservedThrough)
	}
	if diff := cmp.Diff([]recoverylog.Run{{From: 1200, Through: 3200, Every: 200 * time.Millisecond}}, st.Runs); diff != "" {
		t.Errorf("Runs (-want +got):\n%s", diff)
	}
	checkEntries(t, st)
}

// checkTimes checks the times of the batches st replays and of those
// pending.
func checkTimes(t *testing.T, st *recoverylog.State, replay, pending []batch.Time) {
	t.Helper()
	rt, _ := times(st.Replay)
	pt, _ := times(st.Pending)
	if diff := cmp.Diff(replay, rt); diff != "" {
		t.Errorf("Replay (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(pending, pt); diff != "" {
		t.Errorf("Pending (-want +got):\n%s", diff)
	}
}

// checkEntries checks that the compacted log of st recovers to st.
func checkEntries(t *testing.T, st *recoverylog.State) {
	t.Helper()
	again, err := recoverylog.Recover(st.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, again, logtest.EquateEmpty()); diff != "" {
		t.Errorf("State of Entries() (-want +got):\n%s", diff)
	}
}

// TestRecoverEmptyRunCompleted checks how a run's batches complete without
// an entry each: a completion, a snapshot or a later run says every batch
// before it completed; a snapshot forgets the batches it covers, and a run
// all of whose batches it covers.
func TestRecoverEmptyRunCompleted(t *testing.T) {
	tests := []struct {
		name         string
		more         []recoverylog.Entry
		replay, pend []batch.Time
		runs         int
	}{
		{
			name:   "a snapshot in the run",
			more:   []recoverylog.Entry{recoverylog.SnapshotTaken(2400, "b")},
			pend:   []batch.Time{2600, 2800, 3000, 3200},
			runs:   1,
			replay: nil,
		},
		{
			name:   "a later run",
			more:   []recoverylog.Entry{recoverylog.EmptyRun(3400, 13400, 5*time.Second)},
			replay: []batch.Time{1200, 1400, 1600, 1800, 2000, 2200, 2400, 2600, 2800, 3000, 3200},
			pend:   []batch.Time{3400, 8400, 13400},
			runs:   2,
		},
		{
			name:   "reserved times from a later batch",
			more:   []recoverylog.Entry{recoverylog.BatchesReservedFrom(3400, 13400)},
			replay: []batch.Time{1200, 1400, 1600, 1800, 2000, 2200, 2400, 2600, 2800, 3000, 3200},
			runs:   1,
		},
		{
			name: "reserved times said nothing of the batches before them",
			more: []recoverylog.Entry{recoverylog.BatchesReserved(13400)},
			// A pipeline without state's: its timer logs them.
			replay: []batch.Time{1200, 1400, 1600, 1800, 2000},
			pend:   []batch.Time{2200, 2400, 2600, 2800, 3000, 3200},
			runs:   1,
		},
		{
			name: "a snapshot past the run",
			more: []recoverylog.Entry{
				recoverylog.EmptyRun(3400, 13400, 5*time.Second),
				recoverylog.SnapshotTaken(3400, "c"),
			},
			pend: []batch.Time{8400, 13400},
			runs: 1,
		},
		{
			name: "the same run again, as a retried append",
			more: []recoverylog.Entry{recoverylog.EmptyRun(1200, 3200, 200*time.Millisecond)},
			// The repeat says nothing new: the batch at 2200 is as
			// pending as before.
			replay: []batch.Time{1200, 1400, 1600, 1800, 2000},
			pend:   []batch.Time{2200, 2400, 2600, 2800, 3000, 3200},
			runs:   1,
		},
		{
			name: "a batch with blocks pending in the run",
			more: []recoverylog.Entry{blockIn(0, 2, 2600)},
			// Pending with its block, not as an empty batch.
			replay: []batch.Time{1200, 1400, 1600, 1800, 2000},
			pend:   []batch.Time{2200, 2400, 2600, 2800, 3000, 3200},
			runs:   1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := recoverylog.Recover(append(runHistory(), tt.more...))
			if err != nil {
				t.Fatal(err)
			}
			checkTimes(t, st, tt.replay, tt.pend)
			if len(st.Runs) != tt.runs {
				t.Errorf("Runs %v, want %d", st.Runs, tt.runs)
			}
			for _, p := range st.Pending {
				if p.InRun == (len(p.Blocks) > 0) {
					t.Errorf("pending batch %v: InRun %v with blocks %v", p.Time, p.InRun, p.Blocks)
				}
			}
			checkEntries(t, st)
		})
	}
}

// TestCompactReleasingEmptyRun checks that a driver that stops after the
// batch at 2400 gives back the rest of its run: a restart neither runs the
// batches after 2400 nor cuts its own after 3200; and that, told the
// empty batches completed through 2400, it replays them for the state
// rather than running them again.
func TestCompactReleasingEmptyRun(t *testing.T) {
	tests := []struct {
		completed    batch.Time
		replay, pend []batch.Time
	}{
		{0, []batch.Time{1200, 1400, 1600, 1800, 2000}, []batch.Time{2200, 2400}},
		{2400, []batch.Time{1200, 1400, 1600, 1800, 2000, 2200, 2400}, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("completed ", tt.completed), func(t *testing.T) {
			l := logtest.Open(t, recoverylog.NewMemory())
			logtest.MustAppend(t, l, runHistory()...)
			if err := l.CompactReleasing(t.Context(), 2400, tt.completed); err != nil {
				t.Fatal(err)
			}
			st, err := recoverylog.Load(t.Context(), l)
			if err != nil {
				t.Fatal(err)
			}
			checkTimes(t, st, tt.replay, tt.pend)
			if last, _ := st.LastBatch(); last != 2400 {
				t.Errorf("LastBatch %v, want 2400", last)
			}
		})
	}
}
