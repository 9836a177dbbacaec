package lease

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// walkAncestors is Ancestors without the walks it keeps: every held
// lease's ancestors walked now.
func walkAncestors(c *Coordinator, max int) map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[string][]string
	for shard, h := range c.held {
		if parents := c.parentsLocked(shard, h.lease.Parents); len(parents) > 0 {
			if out == nil {
				out = make(map[string][]string)
			}
			out[shard] = c.ancestorsLocked(shard, parents, max)
		}
	}
	return out
}

// Ancestors, which keeps its walks between calls, answers after every
// change of the shard tree what a walk made then answers: a new shard
// list (splits, merges, shards past the retention no longer listed), a
// lease taken, a lease's parents learned from a scan or changed in the
// table, a lease lost (taken by another worker, its item deleted) or
// ended. The changes are random, among a few shards, so that they often
// change a held shard's ancestors; each kind's count of such changes is
// logged.
func TestAncestorsKeptWalks(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "w", db, func(cfg *CoordinatorConfig) { cfg.RenewEveryLease = true })
	tbl := w.c.Table()
	const max = 32
	shards := make([]string, 10)
	for i := range shards {
		shards[i] = fmt.Sprintf("s%d", i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	some := func() string { return shards[rng.IntN(len(shards))] }
	// someParents returns up to two parents of shard, of shards before it
	// (a split or a merge) or, seldom, after it (a broken list's cycle).
	someParents := func(shard string) []string {
		i := slices.Index(shards, shard)
		var ps []string
		for range rng.IntN(3) {
			j := rng.IntN(len(shards))
			if j >= i && rng.IntN(8) > 0 {
				continue
			}
			if p := shards[j]; p != shard && !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
		slices.Sort(ps) // a string set: the table gives it back sorted
		return ps
	}
	held := func() []string {
		var out []string
		for _, l := range w.c.Held() {
			out = append(out, l.Shard)
		}
		slices.Sort(out)
		return out
	}
	fail := func(err error) {
		t.Helper()
		if err != nil && !errors.Is(err, checkpointer.ErrLeaseLost) {
			t.Fatal(err)
		}
	}
	seq := 0
	ops := []struct {
		name   string
		weight int
		do     func()
	}{
		{"new shard list", 2, func() {
			var list []ShardInfo
			for _, s := range shards {
				if rng.IntN(3) > 0 {
					list = append(list, ShardInfo{ID: s, ParentIDs: someParents(s)})
				}
			}
			fail(w.c.SyncShards(ctx, list))
		}},
		{"scan and take", 6, func() { w.c.scanCycle(ctx); w.c.deliver() }},
		{"renew", 2, func() { w.c.renewCycle(ctx); w.c.deliver() }},
		{"lease created", 3, func() {
			shard := some()
			_, err := tbl.Create(ctx, Lease{Shard: shard, Parents: someParents(shard), Checkpoint: "1"})
			fail(err)
		}},
		{"parents rewritten in the table", 2, func() {
			shard := some()
			in := &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: keyOf(shard),
				ConditionExpression: aws.String("attribute_exists(" + attrKey + ")"), UpdateExpression: aws.String("REMOVE " + attrParents)}
			if ps := someParents(shard); len(ps) > 0 {
				in.UpdateExpression = aws.String("SET " + attrParents + " = :p")
				in.ExpressionAttributeValues = map[string]types.AttributeValue{":p": &types.AttributeValueMemberSS{Value: ps}}
			}
			var failed *types.ConditionalCheckFailedException
			if _, err := db.UpdateItem(ctx, in); !errors.As(err, &failed) {
				fail(err)
			}
		}},
		{"taken by another worker", 1, func() {
			l, ok, err := tbl.Get(ctx, some())
			fail(err)
			if ok && l.Owner != "other" {
				_, err = tbl.Take(ctx, l, "other")
				fail(err)
			}
		}},
		{"released by another worker", 2, func() {
			l, ok, err := tbl.Get(ctx, some())
			fail(err)
			if ok && l.Owner == "other" {
				_, err = tbl.Release(ctx, l)
				fail(err)
			}
		}},
		{"item deleted", 1, func() {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: keyOf(some())})
			fail(err)
		}},
		{"checkpoint", 2, func() {
			if h := held(); len(h) > 0 {
				seq++
				fail(w.c.Commit(ctx, h[rng.IntN(len(h))], strconv.Itoa(seq)))
				w.c.deliver()
			}
		}},
		{"shard ended", 1, func() {
			if h := held(); len(h) > 0 {
				fail(w.c.Commit(ctx, h[rng.IntN(len(h))], checkpointer.ShardEnd))
				w.c.deliver()
			}
		}},
	}
	changed := make(map[string]int)
	last := w.c.Ancestors(max)
	for i := range 1000 {
		n := 0
		for _, op := range ops {
			n += op.weight
		}
		n = rng.IntN(n)
		op := ops[0]
		for _, op = range ops {
			if n -= op.weight; n < 0 {
				break
			}
		}
		op.do()
		want := walkAncestors(w.c, max)
		if diff := cmp.Diff(want, w.c.Ancestors(max)); diff != "" {
			t.Fatalf("step %d, after %s: Ancestors (-walked now +kept):\n%s", i, op.name, diff)
		}
		if !cmp.Equal(last, want) {
			changed[op.name]++
		}
		last = want
	}
	t.Logf("changes of the ancestors held, by what changed them: %v", changed)
	for _, op := range []string{"new shard list", "scan and take"} {
		if changed[op] == 0 {
			t.Errorf("no %s changed the ancestors of a lease held: the test tests less than it says", op)
		}
	}
}

// What Ancestors returns is the caller's: writing over it, or appending
// to it, changes neither what the next call returns nor another shard's
// slice.
func TestAncestorsCopies(t *testing.T) {
	c := &Coordinator{held: make(map[string]*heldLease), seen: make(map[string]seenLease)}
	c.learnChildren([]ShardInfo{{ID: "g"}, {ID: "a", ParentIDs: []string{"g"}}, {ID: "b", ParentIDs: []string{"g"}},
		{ID: "x", ParentIDs: []string{"a"}}, {ID: "y", ParentIDs: []string{"b"}}})
	for _, s := range []string{"x", "y"} {
		c.held[s] = &heldLease{lease: Lease{Shard: s}}
	}
	want := map[string][]string{"x": {"a", "g"}, "y": {"b", "g"}}
	got := c.Ancestors(32)
	for shard, as := range got {
		as[0] = "changed"
		got[shard] = append(as, "appended")
	}
	if diff := cmp.Diff(want, c.Ancestors(32)); diff != "" {
		t.Errorf("after the caller changed the first answer, Ancestors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]string{"x": {"changed", "g", "appended"}, "y": {"changed", "g", "appended"}}, got); diff != "" {
		t.Errorf("the first answer, changed by the caller (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]string{"x": {"a"}, "y": {"b"}}, c.Ancestors(1)); diff != "" {
		t.Errorf("Ancestors(1) after Ancestors(32) (-want +got):\n%s", diff)
	}
}

// Ancestors answers, after each kind of change of the shard tree, what a
// walk made then answers, and what the tree says, its walks kept between
// the changes.
func TestAncestorsAfterEachChange(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	hooked := &beforeWriteDB{DynamoDBAPI: db}
	w := newWorker(t, table, "w", hooked, func(cfg *CoordinatorConfig) { cfg.RenewEveryLease = true })
	tbl := w.c.Table()
	create := func(l Lease) {
		t.Helper()
		if _, err := tbl.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	writeParents := func(shard string, parents ...string) error { // the counter as it is
		in := &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: keyOf(shard), UpdateExpression: aws.String("REMOVE " + attrParents)}
		if len(parents) > 0 {
			in.UpdateExpression = aws.String("SET " + attrParents + " = :p")
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":p": &types.AttributeValueMemberSS{Value: parents}}
		}
		_, err := db.UpdateItem(ctx, in)
		return err
	}
	scan := func() { w.c.scanCycle(ctx); w.c.deliver() }
	for _, step := range []struct {
		name   string
		change func()
		want   map[string][]string
	}{
		{
			name: "a lease taken, its parent's lease scanned",
			change: func() {
				create(Lease{Shard: "c", Parents: []string{"p"}, Checkpoint: checkpointer.TrimHorizon}) // not begun: the scans keep p
				create(Lease{Shard: "p", Parents: []string{"g"}, Checkpoint: checkpointer.ShardEnd})
				scan()
			},
			want: map[string][]string{"c": {"p", "g"}},
		},
		{
			name: "a lease's parents learned from a scan",
			change: func() {
				create(Lease{Shard: "g", Parents: []string{"gg"}, Checkpoint: checkpointer.ShardEnd})
				scan()
			},
			want: map[string][]string{"c": {"p", "g", "gg"}},
		},
		{
			name: "an ended lease deleted, its shard not listed",
			change: func() {
				if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: keyOf("p")}); err != nil {
					t.Fatal(err)
				}
				scan()
			},
			want: map[string][]string{"c": {"p"}},
		},
		{
			name: "a shard list: a merge, then a split",
			change: func() {
				if err := w.c.SyncShards(ctx, []ShardInfo{{ID: "g1"}, {ID: "g2"}, {ID: "p", ParentIDs: []string{"g1", "g2"}},
					{ID: "c", ParentIDs: []string{"p"}}, {ID: "d", ParentIDs: []string{"p"}}}); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string][]string{"c": {"p", "g1", "g2"}},
		},
		{
			name:   "the split's other child taken",
			change: scan,
			want:   map[string][]string{"c": {"p", "g1", "g2"}, "d": {"p", "g1", "g2"}},
		},
		{
			name: "an unlisted lease taken",
			change: func() {
				create(Lease{Shard: "x", Parents: []string{"y"}, Checkpoint: "1"})
				scan()
			},
			want: map[string][]string{"c": {"p", "g1", "g2"}, "d": {"p", "g1", "g2"}, "x": {"y"}},
		},
		{
			name: "its parents removed in the table, seen by a renewal",
			change: func() {
				if err := writeParents("x"); err != nil {
					t.Fatal(err)
				}
				w.c.renewCycle(ctx)
			},
			want: map[string][]string{"c": {"p", "g1", "g2"}, "d": {"p", "g1", "g2"}},
		},
		{
			name: "a lease lost",
			change: func() {
				l := mustGet(t, tbl, "c")
				if _, err := tbl.Take(ctx, l, "other"); err != nil {
					t.Fatal(err)
				}
				scan()
			},
			want: map[string][]string{"d": {"p", "g1", "g2"}},
		},
		{
			// A take writes the parents its scan read, if any: a lease
			// scanned without is taken with those written since.
			name: "lost, then taken again, parents written after the scan before the take",
			change: func() {
				for _, shard := range []string{"g1", "g2"} { // ended: d's and c's leases are the only ones active but x
					if err := w.c.Commit(ctx, shard, checkpointer.ShardEnd); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := tbl.Take(ctx, mustGet(t, tbl, "x"), "other"); err != nil {
					t.Fatal(err)
				}
				scan() // x lost
				// The other worker gives both back, c first: x is the
				// only lease the last scan takes.
				for _, shard := range []string{"c", "x"} {
					if _, err := tbl.Release(ctx, mustGet(t, tbl, shard)); err != nil {
						t.Fatal(err)
					}
					if shard == "c" {
						scan()
					}
				}
				isTake := func(expr string) bool { return strings.Contains(expr, ":newowner") }
				hooked.once(isTake, func() { // on a take's goroutine
					if err := writeParents("x", "z2"); err != nil {
						t.Error(err)
					}
				})
				scan()
			},
			want: map[string][]string{"c": {"p", "g1", "g2"}, "d": {"p", "g1", "g2"}, "x": {"z2"}},
		},
	} {
		step.change()
		walked := walkAncestors(w.c, 32)
		if diff := cmp.Diff(walked, w.c.Ancestors(32)); diff != "" {
			t.Fatalf("after %s: Ancestors (-walked now +kept):\n%s", step.name, diff)
		}
		if diff := cmp.Diff(step.want, walked); diff != "" {
			t.Fatalf("after %s: ancestors (-want +got):\n%s", step.name, diff)
		}
	}
}
