package lease

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Ancestors names, for each lease held with parents, its parents and then
// theirs as the shard list names them (else as the last scan's leases
// do), nearest first, each once, at most max: a shard split and its
// children merged again names the grandparent too, which a write of the
// merged shard must fence off.
func TestAncestors(t *testing.T) {
	chain := make([]ShardInfo, 40) // shard i is the child of shard i-1
	for i := range chain {
		chain[i] = ShardInfo{ID: fmt.Sprintf("s%02d", i)}
		if i > 0 {
			chain[i].ParentIDs = []string{chain[i-1].ID}
		}
	}
	for _, tc := range []struct {
		name    string
		list    []ShardInfo
		scanned []Lease
		held    []Lease
		max     int
		want    map[string][]string
	}{
		{
			name: "split then merged",
			list: []ShardInfo{{ID: "g"}, {ID: "a", ParentIDs: []string{"g"}}, {ID: "b", ParentIDs: []string{"g"}},
				{ID: "m", ParentIDs: []string{"a", "b"}}},
			held: []Lease{{Shard: "m", Parents: []string{"a", "b"}}, {Shard: "root"}},
			max:  32,
			want: map[string][]string{"m": {"a", "b", "g"}},
		},
		{
			name:    "a parent not listed, its lease scanned",
			list:    []ShardInfo{{ID: "c", ParentIDs: []string{"p"}}},
			scanned: []Lease{{Shard: "p", Parents: []string{"g"}}},
			held:    []Lease{{Shard: "c", Parents: []string{"p"}}},
			max:     32,
			want:    map[string][]string{"c": {"p", "g"}},
		},
		{
			name: "the lease's parents when the list has none",
			held: []Lease{{Shard: "c", Parents: []string{"p", "q"}}},
			max:  32,
			want: map[string][]string{"c": {"p", "q"}},
		},
		{
			// A lease table kept across a stream deleted and created again
			// with the same name: the leases name the old stream's
			// parents, the shard list the new one's.
			name:    "the shard list's parents over a lease's",
			list:    []ShardInfo{{ID: "c", ParentIDs: []string{"p"}}, {ID: "p"}, {ID: "r"}},
			scanned: []Lease{{Shard: "p", Parents: []string{"g"}}},
			held:    []Lease{{Shard: "c", Parents: []string{"old"}}, {Shard: "r", Parents: []string{"old"}}},
			max:     32,
			want:    map[string][]string{"c": {"p"}},
		},
		{
			name: "nearest first, at most max",
			list: chain,
			held: []Lease{{Shard: "s39", Parents: []string{"s38"}}},
			max:  3,
			want: map[string][]string{"s39": {"s38", "s37", "s36"}},
		},
		{
			name: "a cycle in a broken list",
			list: []ShardInfo{{ID: "x", ParentIDs: []string{"y"}}, {ID: "y", ParentIDs: []string{"x"}}},
			held: []Lease{{Shard: "x", Parents: []string{"y"}}},
			max:  32,
			want: map[string][]string{"x": {"y"}},
		},
		{
			name: "max 0",
			held: []Lease{{Shard: "c", Parents: []string{"p"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Coordinator{held: make(map[string]*heldLease), seen: make(map[string]seenLease)}
			c.learnChildren(tc.list)
			for _, l := range tc.scanned {
				c.seen[l.Shard] = seenLease{lease: l}
			}
			for _, l := range tc.held {
				c.held[l.Shard] = &heldLease{lease: l}
			}
			if diff := cmp.Diff(tc.want, c.Ancestors(tc.max)); diff != "" {
				t.Errorf("Ancestors(%d) (-want +got):\n%s", tc.max, diff)
			}
		})
	}
}
