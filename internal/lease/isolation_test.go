package lease

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// TestCoordinatorBadItemsIsolated runs two workers on a table holding
// malformed items beside good leases: the good leases are all taken and
// spread, each bad item is reported once (OnBadItem) however many scans
// see it, counted, and never taken or rewritten.
func TestCoordinatorBadItemsIsolated(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	var mu sync.Mutex
	reported := map[string]int{}
	onBad := func(c *CoordinatorConfig) {
		c.OnBadItem = func(b *leasetable.BadItemError) { mu.Lock(); reported[b.Key]++; mu.Unlock() }
	}
	w1 := newWorker(t, table, "w1", db, onBad)
	w2 := newWorker(t, table, "w2", db, onBad)
	items := badItems()
	for _, item := range items {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	shards := shardIDs(4)
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatalf("SyncShards beside bad items: %v", err)
	}
	for range 4 {
		w1.cycle(ctx)
		w2.cycle(ctx)
	}
	if err := checkSpread([]*worker{w1, w2}, len(shards)); err != nil {
		t.Error(err)
	}
	want := map[string]int{}
	for k := range items {
		want[k] = 2 // once per worker
	}
	mu.Lock()
	if d := cmp.Diff(want, reported); d != "" {
		t.Errorf("reports per bad item (-want +got):\n%s", d)
	}
	mu.Unlock()
	if n := w1.c.BadItems(); n != len(items) {
		t.Errorf("BadItems = %d, want %d", n, len(items))
	}
	for k, item := range items {
		if d := cmp.Diff(item, rawItemOf(t, db, table, k), avOpts, cmpL); d != "" {
			t.Errorf("bad item %s was written (-want +got):\n%s", k, d)
		}
	}
}

var cmpL = cmp.Comparer(func(a, b types.AttributeValueMemberL) bool { return len(a.Value) == len(b.Value) })

func rawItemOf(t *testing.T, db *dynamodb.Client, table, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: keyOf(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// TestCoordinatorZombieNeverStealsBack is defect 5's scenario, made
// deterministic: w1 holds one lease and is paused past its lease duration;
// w2 takes it over and holds every lease; w1 resumes and runs a take cycle
// before any renewal. w1 must report the loss before anything else for that
// shard and must not steal it back while it believes it holds it.
func TestCoordinatorZombieNeverStealsBack(t *testing.T) {
	for trial := range 12 { // the steal victim is random: many trials
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			ctx := t.Context()
			db := servers.Env(t).DynamoDB()
			table := localaws.UniqueName(t)
			shards := shardIDs(3)
			w1 := newWorker(t, table, "w1", db, func(c *CoordinatorConfig) { c.MaxLeases = 1 })
			if err := w1.c.SyncShards(ctx, shards); err != nil {
				t.Fatal(err)
			}
			w1.cycle(ctx)
			mine := w1.held()
			if len(mine) != 1 {
				t.Fatalf("w1 holds %v, want 1 lease", mine)
			}
			w2 := newWorker(t, table, "w2", db, nil)
			w2.cycle(ctx)
			w2.clk.Advance(testLease)
			w2.cycle(ctx) // w1's lease expired on w2's clock: taken over
			if len(w2.held()) != 3 {
				t.Fatalf("w2 holds %v, want all 3", w2.held())
			}
			// w1 resumes: its clock moved on, it still believes it holds its
			// lease, and its take cycle runs first; without a cap, it wants 2.
			w1.c.cfg.MaxLeases = 0
			w1.clk.Advance(testLease)
			w1.c.takeCycle(ctx)
			w1.c.deliver()
			w1.mu.Lock()
			defer w1.mu.Unlock()
			if d := cmp.Diff(mine, w1.lost); d != "" {
				t.Fatalf("w1 lost (-want +got):\n%s", d)
			}
			for _, l := range w1.acquired[1:] {
				if l.Shard == mine[0] {
					t.Errorf("w1 stole back %s in the cycle that saw it lost", l.Shard)
				}
			}
		})
	}
}

// TestCoordinatorRefuse hands back a lease whose checkpoint the caller
// cannot read from, and checks that it is not taken again until its
// checkpoint changes.
func TestCoordinatorRefuse(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "w", db, func(c *CoordinatorConfig) { c.RenewEveryLease = true }) // every cycle scans
	if err := w.c.SyncShards(ctx, shardIDs(2)); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	shard := shardIDs(1)[0].ID
	if err := w.c.Commit(ctx, shard, "340282366920938463463374607431768211455"); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Refuse(ctx, shard, errors.New("no such record")); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	w.cycle(ctx)
	if got := w.held(); len(got) != 1 || got[0] == shard {
		t.Fatalf("after refusing %s: holds %v", shard, got)
	}
	if l := mustGet(t, w.c.Table(), shard); l.Owner != "" {
		t.Errorf("refused lease: owner %q, want none", l.Owner)
	}
	// An operator fixes the checkpoint: the lease is taken again.
	_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: keyOf(shard),
		UpdateExpression:          aws.String("SET #c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": attrCheckpoint},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": str(checkpointer.TrimHorizon)},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	if got := w.held(); len(got) != 2 {
		t.Errorf("after the fix: holds %v, want both", got)
	}
}
