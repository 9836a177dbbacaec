package kinesis

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/source"
)

// callState is a source.ShardState that notes the calls it gets.
type callState struct{ calls []string }

func (s *callState) got() []string { return s.calls }

func (s *callState) Shape() string { return "calls" }

func (s *callState) Snapshot(context.Context, source.Shard) ([]byte, string, error) {
	s.calls = append(s.calls, "Snapshot")
	return []byte("state"), "7", nil
}

func (s *callState) Load(context.Context, source.Shard, ...[]byte) error {
	s.calls = append(s.calls, "Load")
	return nil
}

func (s *callState) Drop(context.Context, source.Shard) error {
	s.calls = append(s.calls, "Drop")
	return nil
}

// handOverState is a callState that takes a last snapshot and drops in
// one step, as weir's driver does.
type handOverState struct{ callState }

func (s *handOverState) SnapshotAndDrop(context.Context, source.Shard) ([]byte, string, error) {
	s.calls = append(s.calls, "SnapshotAndDrop")
	return []byte("last"), "8", nil
}

// A final save (a hand-off, a drain, a shard's end) takes the shard's
// snapshot with the drop of its state in the driver, in one step, when the
// driver offers it (source.ShardStateHandOver): no batch between them
// times out the keys the next owner loads. The saves after it give that
// snapshot again (a failed store is tried again with it), and the drop
// that follows the hand-off drops nothing more. A ShardState without it
// gets a Snapshot and, later, a Drop, as before.
func TestStateRunFinalSnapshotDrops(t *testing.T) {
	lr := &leaseRun{log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		name   string
		states interface {
			source.ShardState
			got() []string
		}
		want      []string
		data, pos string
	}{
		{"ShardStateHandOver", &handOverState{}, []string{"Snapshot", "SnapshotAndDrop"}, "last", "8"},
		{"ShardState only", &callState{}, []string{"Snapshot", "Snapshot", "Snapshot", "Drop"}, "state", "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &stateRun{states: tc.states, held: map[string]*heldState{"s-1": {shard: source.Shard{ID: "s-1"}}}}
			h := sr.held["s-1"]
			if _, _, err := sr.snapshot(t.Context(), h, false); err != nil { // a periodic save
				t.Fatal(err)
			}
			for range 2 { // a final save, and its retry
				data, pos, err := sr.snapshot(t.Context(), h, true)
				if err != nil || string(data) != tc.data || pos != tc.pos {
					t.Fatalf("final snapshot = %q, %q, %v; want %q, %q", data, pos, err, tc.data, tc.pos)
				}
			}
			sr.drop(t.Context(), lr, "s-1")
			if got := tc.states.got(); !slices.Equal(got, tc.want) {
				t.Errorf("calls %v, want %v", got, tc.want)
			}
		})
	}
}

// A retaken shard is settled, its state loaded, only once every range
// added to a block is completed, whichever hold of its lease added it: a
// hold that reads again from a snapshot behind what an earlier one
// completed adds ranges the greatest completed number already covers, and
// loaded before they complete, the state counts them, and the new hold's
// reader reads them again (TestLeasesStatePerShardRetakenWithRecordsPending
// shows it end to end). A completion of a range never added (a block the
// recovery log held uncompleted at Start) leaves the shard's own ranges
// pending.
func TestSettledAcrossHolds(t *testing.T) {
	type step struct {
		added     batch.SeqRange // or
		completed batch.SeqRange
		want      bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"one hold", []step{
			{added: rng("a", "1", "5", 5), want: false},
			{added: rng("a", "6", "10", 5), want: false},
			{completed: rng("a", "1", "5", 5), want: false},
			{completed: rng("a", "6", "10", 5), want: true},
		}},
		{"a later hold reading again", []step{
			{added: rng("a", "1", "5", 5)},
			{added: rng("a", "6", "10", 5)},
			{completed: rng("a", "1", "5", 5)},
			{completed: rng("a", "6", "10", 5), want: true},
			{added: rng("a", "1", "5", 5), want: false},
			{added: rng("a", "6", "8", 3), want: false},
			{completed: rng("a", "1", "5", 5), want: false},
			{completed: rng("a", "6", "8", 3), want: true},
		}},
		{"recovered blocks completed", []step{
			{completed: rng("a", "1", "3", 3), want: true},
			{added: rng("a", "5", "9", 5), want: false},
			{completed: rng("a", "4", "4", 1), want: false},
			{completed: rng("a", "5", "9", 5), want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProgress()
			lr := &leaseRun{rn: &run{r: &Receiver{progress: p}}}
			l := lease.Lease{Shard: "a"}
			if !lr.settled(l) {
				t.Fatal("a shard never read is not settled")
			}
			for i, s := range tt.steps {
				what := fmt.Sprintf("added %v", s.added)
				if s.added.Shard != "" {
					p.adding(s.added.Shard)
					p.added(s.added)
				} else {
					p.completed([]batch.SeqRange{s.completed})
					what = fmt.Sprintf("completed %v", s.completed)
				}
				if got := lr.settled(l); got != s.want {
					t.Errorf("step %d (%s): settled = %v, want %v", i, what, got, s.want)
				}
			}
		})
	}
}

// A drain waits (awaitCompleted) until every range of an owned shard added
// to a block is completed, whichever hold of its lease added it, before
// the last snapshots, checkpoints and the hand-back: a hold that reads again
// from a snapshot behind what an earlier hold completed stores ranges the
// greatest completed number already covers, which a wait on the greatest
// numbers alone does not see. Handed back before them, the shard's last
// snapshot leaves them out and its next owner reads them again, while this
// worker's outputs still get them: the same records delivered by two
// workers after a graceful stop.
func TestDrainWaitsForRangesReadAgain(t *testing.T) {
	type step struct {
		added     batch.SeqRange // added and stored, or
		completed batch.SeqRange
		want      bool
	}
	steps := []step{
		// The first hold reads 1-10 and completes it.
		{added: rng("a", "1", "5", 5), want: false},
		{added: rng("a", "6", "10", 5), want: false},
		{completed: rng("a", "1", "5", 5), want: false},
		{completed: rng("a", "6", "10", 5), want: true},
		// A later hold reads 1-8 again from a snapshot at 0.
		{added: rng("a", "1", "5", 5), want: false},
		{added: rng("a", "6", "8", 3), want: false},
		{completed: rng("a", "1", "5", 5), want: false},
		{completed: rng("a", "6", "8", 3), want: true},
	}
	p := newProgress()
	lr := &leaseRun{rn: &run{r: &Receiver{progress: p}}, owned: map[string]bool{"a": true}}
	if !lr.allCompleted() {
		t.Fatal("a shard with nothing read is not completed")
	}
	for i, s := range steps {
		what := fmt.Sprintf("added %v", s.added)
		if s.added.Shard != "" {
			p.adding(s.added.Shard)
			p.added(s.added)
			p.stored([]batch.SeqRange{s.added})
		} else {
			p.completed([]batch.SeqRange{s.completed})
			what = fmt.Sprintf("completed %v", s.completed)
		}
		if got := lr.allCompleted(); got != s.want {
			st := p.shards["a"]
			t.Errorf("step %d (%s): the drain's wait is over = %v, want %v (pending %d, completed %q, stored %q)",
				i, what, got, s.want, st.pending, st.completed, st.latestStored)
		}
	}
}
