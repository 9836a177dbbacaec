package kinesis

import (
	"context"
	"log/slog"
	"slices"
	"testing"

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
