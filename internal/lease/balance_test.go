package lease

import (
	"fmt"
	"sort"
	"testing"

	"github.com/weirstream/weir/internal/checkpointer"

	"github.com/google/go-cmp/cmp"
)

func TestTakePlan(t *testing.T) {
	lease := func(shard, owner string, expired bool, parents ...string) leaseView {
		return leaseView{Lease: Lease{Shard: shard, Owner: owner, Checkpoint: checkpointer.TrimHorizon, Parents: parents}, expired: expired}
	}
	ended := func(shard string) leaseView {
		return leaseView{Lease: Lease{Shard: shard, Checkpoint: checkpointer.ShardEnd}}
	}
	tests := []struct {
		name      string
		views     []leaseView
		held      []string
		maxSteals int
		maxLeases int
		want      []string // shards, sorted; for steals, how many matter
		wantN     int      // when > 0, only the count is checked
		never     string   // a shard no plan may hold, checked over many plans
	}{
		{
			name:  "alone: take every unowned lease",
			views: []leaseView{lease("a", "", false), lease("b", "", false)},
			want:  []string{"a", "b"},
		},
		{
			name:  "expired leases of a dead worker",
			views: []leaseView{lease("a", "dead", true), lease("b", "dead", true), lease("c", "me", false)},
			held:  []string{"c"},
			want:  []string{"a", "b"},
		},
		{
			name:  "alive worker's leases are not taken while balanced",
			views: []leaseView{lease("a", "w2", false), lease("b", "me", false)},
			held:  []string{"b"},
			want:  nil,
		},
		{
			name: "children wait for parents at SHARD_END; missing parents count as done",
			views: []leaseView{
				lease("p", "", false), ended("q"),
				lease("c1", "", false, "p"), lease("c2", "", false, "q"), lease("c3", "", false, "gone"),
			},
			want: []string{"c2", "c3", "p"},
		},
		{
			name:      "steal one from the most loaded worker",
			views:     []leaseView{lease("a", "w2", false), lease("b", "w2", false), lease("c", "w2", false), lease("d", "w2", false)},
			maxSteals: 1,
			wantN:     1,
		},
		{
			name:      "stealing disabled",
			views:     []leaseView{lease("a", "w2", false), lease("b", "w2", false)},
			maxSteals: -1,
			want:      nil,
		},
		{
			name: "no steal when the victim is at target and one is needed",
			views: []leaseView{
				lease("a", "w2", false), lease("b", "w2", false), lease("c", "w3", false), lease("d", "w3", false),
				lease("e", "me", false),
			},
			held:      []string{"e"},
			maxSteals: 1,
			want:      nil,
		},
		{
			name:      "cap on leases per worker",
			views:     []leaseView{lease("a", "", false), lease("b", "", false), lease("c", "", false)},
			maxLeases: 2,
			wantN:     2,
		},
		{
			// A paused worker that still believes it holds "a", which w2
			// took meanwhile, may steal "b" or "c", never "a" (the only
			// choice left but one in a three-lease victim: every random
			// order is checked by repeating the plan below).
			name:      "never steal a shard I hold",
			views:     []leaseView{lease("a", "w2", false), lease("b", "w2", false), lease("c", "w2", false)},
			held:      []string{"a"},
			maxSteals: 1,
			wantN:     1,
			never:     "a",
		},
		{
			name:  "my own lease from a previous run",
			views: []leaseView{lease("a", "me", false)},
			want:  []string{"a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			held := map[string]bool{}
			for _, h := range tc.held {
				held[h] = true
			}
			if tc.never != "" {
				for range 200 {
					for _, l := range takePlan("me", tc.views, held, nil, tc.maxSteals, tc.maxLeases) {
						if l.Shard == tc.never {
							t.Fatalf("planned to take %s", l.Shard)
						}
					}
				}
			}
			var got []string
			for _, l := range takePlan("me", tc.views, held, nil, tc.maxSteals, tc.maxLeases) {
				got = append(got, l.Shard)
			}
			sort.Strings(got)
			if tc.wantN > 0 {
				if len(got) != tc.wantN {
					t.Errorf("took %v, want %d leases", got, tc.wantN)
				}
				return
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("takePlan (-want +got):\n%s", d)
			}
		})
	}
}

// TestStealPlanSpreads checks one take cycle steals the whole deficit,
// spread over the busiest workers, leaving none below the thief.
func TestStealPlanSpreads(t *testing.T) {
	var views []leaseView
	add := func(owner string, n int) {
		for i := range n {
			views = append(views, leaseView{Lease: Lease{Shard: fmt.Sprintf("%s-%d", owner, i), Owner: owner, Checkpoint: checkpointer.TrimHorizon}})
		}
	}
	add("w2", 9)
	add("w3", 7)
	// 16 leases over 3 workers: 5 or 6 each, w2 and w3 drained in turn.
	got := map[string]int{}
	for _, l := range takePlan("me", views, nil, nil, 0, 0) {
		got[l.Owner]++
	}
	if d := cmp.Diff(map[string]int{"w2": 4, "w3": 1}, got); d != "" {
		t.Errorf("stolen per victim (-want +got):\n%s", d)
	}
	got = map[string]int{}
	for _, l := range takePlan("me", views, nil, nil, 2, 0) {
		got[l.Owner]++
	}
	if got["w2"] != 2 || len(got) != 1 {
		t.Errorf("with MaxStealsPerCycle 2: stolen per victim %v, want w2 2", got)
	}
}

// TestStealPlanSkipsWorkerHandingOff: a busiest worker whose leases are all
// under hand-off to another (CheckpointOwner set) has nothing to steal;
// the plan steals from the next busiest instead of planning nothing (a
// joining worker then waited for its next full scan, 10 minutes by
// default, holding no lease).
func TestStealPlanSkipsWorkerHandingOff(t *testing.T) {
	lease := func(shard, owner, handingTo string) leaseView {
		return leaseView{Lease: Lease{Shard: shard, Owner: owner, CheckpointOwner: handingTo, Checkpoint: checkpointer.TrimHorizon}}
	}
	views := []leaseView{lease("0", "w1", "w2"), lease("1", "w2", ""), lease("2", "w1", "w2"), lease("3", "w2", "")}
	got := takePlan("w3", views, nil, nil, 0, 0)
	if len(got) != 1 || got[0].Owner != "w2" {
		t.Errorf("plan %v, want one lease of w2 (w1's are both under hand-off)", got)
	}
}
