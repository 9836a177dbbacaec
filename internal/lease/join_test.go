package lease

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/localaws"
)

// TestCoordinatorBalancesAJoin has one worker hold 64 leases and two
// workers join it, in virtual time at the default periods: the leases are
// spread (21 or 22 each) within two take cycles of the join, where one
// steal per cycle took 42 cycles. "Together" has the joiners' cycles race,
// each first seeing only the first worker and stealing from it at once:
// within three cycles there.
func TestCoordinatorBalancesAJoin(t *testing.T) {
	const shards = 64
	for _, together := range []bool{false, true} {
		t.Run(fmt.Sprintf("together=%v", together), func(t *testing.T) {
			ctx := t.Context()
			ws := defaultFleet(t, 3, shards, nil)
			ws[0].cycle(ctx)
			if n := len(ws[0].held()); n != shards {
				t.Fatalf("the first worker holds %d leases, want %d", n, shards)
			}
			take := ws[0].c.cfg.TakeInterval
			balanced := func() bool { return checkSpread(ws, shards) == nil }
			// Take cycles at 0 (the joiners' first), TakeInterval and
			// 2*TakeInterval. Racing joiners may steal from each other
			// before either has a beat to read a steal notice on, and
			// learn it at their next scan only: a third cycle then.
			first, _ := runFor(ctx, ws, 2*take, together, balanced)
			limit := take
			if together {
				limit = 2 * take
			}
			if first < 0 || first > limit {
				t.Fatalf("balanced %v after the join, want within %v: %v", first, limit, checkSpread(ws, shards))
			}
			t.Logf("balanced %v after the join", first)
			// Every worker's view agrees with the table once the
			// hand-offs asked for are done: a hand-off asked at the last
			// take cycle is read by the holder's next beat (its steal
			// notice), which hands it off at once (no OnHandoff), and the
			// thief takes it at the take cycle of that instant: one
			// period. A balanced fleet asks for none after it.
			runFor(ctx, ws, 2*take, together, nil)
			table := owners(t, ws[0].c.Table())
			for _, w := range ws {
				if n := len(w.held()); n < shards/3 || n > shards/3+1 {
					t.Errorf("%s believes it holds %d leases", w.c.WorkerID(), n)
				}
				for _, s := range w.held() {
					if table[s] != w.c.WorkerID() {
						t.Errorf("%s believes it holds %s, which the table gives %q", w.c.WorkerID(), s, table[s])
					}
				}
				w.c.mu.Lock()
				pending := slices.Sorted(maps.Keys(w.c.pending))
				w.c.mu.Unlock()
				if len(pending) > 0 {
					t.Errorf("%s still waits for the hand-off of %v", w.c.WorkerID(), pending)
				}
			}
		})
	}
}

// defaultFleet returns n workers on a new table at the default periods
// (tweak, if not nil, edits each config further), the table holding
// unowned leases of shards shards.
func defaultFleet(t *testing.T, n, shards int, tweak func(*CoordinatorConfig)) []*worker {
	t.Helper()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	var ws []*worker
	for i := range n {
		ws = append(ws, newWorker(t, table, fmt.Sprintf("worker-%d", i), db, func(c *CoordinatorConfig) {
			c.LeaseDuration = 0 // every period at its default
			if tweak != nil {
				tweak(c)
			}
		}))
	}
	if err := ws[0].c.SyncShards(t.Context(), shardIDs(shards)); err != nil {
		t.Fatal(err)
	}
	return ws
}
