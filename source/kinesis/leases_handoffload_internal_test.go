package kinesis

import (
	"context"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/shardstate"
	"github.com/weirstream/weir/source"
)

// nopStore is a shard state store holding nothing.
type nopStore struct{}

func (nopStore) Put(context.Context, shardstate.Key, shardstate.Snapshot) error { return nil }
func (nopStore) Claim(context.Context, shardstate.Key, shardstate.Lease) error  { return nil }
func (nopStore) Get(context.Context, shardstate.Key) (shardstate.Snapshot, error) {
	return shardstate.Snapshot{}, shardstate.ErrNoSnapshot
}

// loadCounter is a driver's state per shard that counts its loads.
type loadCounter struct {
	mu    sync.Mutex
	loads int
}

func (*loadCounter) Shape() string { return "count" }
func (*loadCounter) Snapshot(context.Context, source.Shard) ([]byte, string, error) {
	return nil, "", nil
}
func (c *loadCounter) Load(ctx context.Context, _ source.Shard, _ ...[]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loads++
	return ctx.Err()
}
func (*loadCounter) Drop(context.Context, source.Shard) error { return nil }

// A hand-off asked for before the load of the shard's state started, even
// in the moment after acquire looked for a queued one (asked then finds no
// load under way to cancel), abandons the load: nothing is loaded. Before,
// acquire looked before it registered the shard and the load did not: one
// asked for in between loaded the state, the reader started, and the
// hand-off waited for the whole load.
func TestLoadStateAskedBeforeItStarts(t *testing.T) {
	states := &loadCounter{}
	lr := &leaseRun{rn: &run{cfg: Config{Stream: "s"}}}
	lr.state = &stateRun{states: states, store: nopStore{}, held: map[string]*heldState{}}
	l := lease.Lease{Shard: "shardId-000000000000", Owner: "w", Counter: 3,
		StartingHashKey: "0", EndingHashKey: "340282366920938463463374607431768211455"}
	lr.asked(l.Shard)
	_, abandoned, err := lr.loadState(t.Context(), l)
	if !abandoned || err == nil {
		t.Errorf("loadState with a hand-off of the shard queued: abandoned %v, err %v; want abandoned, with an error", abandoned, err)
	}
	if states.loads != 0 {
		t.Errorf("the driver loaded the state of a shard asked for %d times, want none", states.loads)
	}
	if len(lr.state.held) != 0 {
		t.Errorf("the shard's state is held after an abandoned load: %v", lr.state.held)
	}
}
