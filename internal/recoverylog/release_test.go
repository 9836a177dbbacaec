package recoverylog_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
)

// TestCompactReleasingInterrupted cuts short the compaction of a stopping
// driver (CompactReleasing) after each of its entries, as a crash leaves a
// DynamoDB log (the old entries, then some of the new): the log must
// recover, reserve at least the batch times the finished compaction does,
// replay or run every batch it replays, and run every batch it runs; what
// it recovers to must survive a compaction of its own.
func TestCompactReleasingInterrupted(t *testing.T) {
	noSnapshot := []recoverylog.Entry{
		blockIn(0, 0, 1000), recoverylog.BatchCompleted(1000),
		recoverylog.EmptyRun(1200, 3200, 200*time.Millisecond),
		blockIn(0, 1, 2000), recoverylog.BatchCompleted(2000),
	}
	tests := []struct {
		name         string
		h            []recoverylog.Entry
		t, completed batch.Time
	}{
		{"released, none completed", runHistory(), 2400, 0},
		{"released, completed", runHistory(), 2400, 2400},
		{"completed through the run's end", runHistory(), 3200, 3200},
		{"a batch with a block pending", append(runHistory(), blockIn(0, 2, 2600)), 2600, 2400},
		{"a later run", append(runHistory(), recoverylog.EmptyRun(3400, 13400, 5*time.Second)), 8400, 8400},
		{"without a snapshot", noSnapshot, 2400, 2400},
		{"logtest.RunHistory", logtest.RunHistory("r"), 31000, 21000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := logtest.Open(t, recoverylog.NewMemory())
			logtest.MustAppend(t, l, tt.h...)
			if err := l.CompactReleasing(t.Context(), tt.t, tt.completed); err != nil {
				t.Fatal(err)
			}
			copies, err := l.Read(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want, err := recoverylog.Recover(copies)
			if err != nil {
				t.Fatal(err)
			}
			wantLast, _ := want.LastBatch()
			wantReplay, _ := times(want.Replay)
			wantPending, _ := times(want.Pending)
			for n := range len(copies) + 1 {
				got, err := recoverylog.Recover(append(slices.Clone(tt.h), copies[:n]...))
				if err != nil {
					t.Fatalf("the log and %d of its %d new entries: %v", n, len(copies), err)
				}
				if last, _ := got.LastBatch(); last < wantLast {
					t.Errorf("the log and %d new entries: LastBatch %v, want at least %v", n, last, wantLast)
				}
				replay, _ := times(got.Replay)
				pending, _ := times(got.Pending)
				for _, bt := range wantReplay {
					if !slices.Contains(replay, bt) && !slices.Contains(pending, bt) {
						t.Errorf("the log and %d new entries: batch %v neither replayed nor pending (replay %v, pending %v)", n, bt, replay, pending)
					}
				}
				for _, bt := range wantPending {
					if !slices.Contains(pending, bt) {
						t.Errorf("the log and %d new entries: batch %v not pending (pending %v)", n, bt, pending)
					}
				}
				again, err := recoverylog.Recover(got.Entries())
				if err != nil {
					t.Fatalf("Recover(Entries()) of the log and %d new entries: %v", n, err)
				}
				if diff := cmp.Diff(got, again, logtest.EquateEmpty()); diff != "" {
					t.Errorf("the log and %d new entries: State of Entries() (-want +got):\n%s", n, diff)
				}
			}
		})
	}
}
