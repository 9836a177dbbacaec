package lease

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// TestCoordinatorBadItemRepairedWithinTakeCycle breaks a lease item, lets a
// scan report it, repairs it, and checks that the very next take cycle
// (no scan due: ScanInterval is minutes away) takes it: a repaired item is
// looked at every take cycle, not only at the next periodic scan.
func TestCoordinatorBadItemRepairedWithinTakeCycle(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "w1", db, nil)
	shards := shardIDs(2)
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	broken := badItems()["counter-string"]
	broken["leaseKey"] = str("shardId-broken")
	delete(broken, "leaseOwner")
	put(t, db, table, broken)
	for range 3 { // takes the good leases, then scans no more
		w.cycle(ctx)
	}
	if got := w.held(); len(got) != 2 || w.c.BadItems() != 1 {
		t.Fatalf("held %v, %d bad items; want the 2 good leases and 1 bad item", got, w.c.BadItems())
	}
	broken["leaseCounter"] = num(0)
	put(t, db, table, broken)
	w.cycle(ctx)
	if got := w.held(); len(got) != 3 {
		t.Errorf("after the repair and one take cycle: held %v, want the repaired lease too", got)
	}
	if n := w.c.BadItems(); n != 0 {
		t.Errorf("BadItems = %d after the repair, want 0", n)
	}
}

// TestCoordinatorEditedHeldItemReported removes the leaseCounter of a lease
// the worker holds: its next checkpoint fails, and the item is reported as
// unreadable at once (OnBadItem, logged with its leaseKey and the fix),
// once, however many cycles see it afterwards.
func TestCoordinatorEditedHeldItemReported(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	var logs syncBuf
	var mu sync.Mutex
	var reported []string
	w := newWorker(t, table, "w1", db, func(c *CoordinatorConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.OnBadItem = func(b *leasetable.BadItemError) {
			mu.Lock()
			reported = append(reported, b.Key+" "+b.Attr)
			mu.Unlock()
		}
	})
	shards := shardIDs(1)
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	shard := shards[0].ID
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: keyOf(shard), UpdateExpression: aws.String("REMOVE leaseCounter"),
	}); err != nil {
		t.Fatal(err)
	}
	err := w.c.Commit(ctx, shard, "49590338271490256608559692538361571095921575989136588898")
	if !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Fatalf("Commit on an edited item = %v, want ErrLeaseLost", err)
	}
	w.c.deliver()
	want := shard + " leaseCounter"
	mu.Lock()
	got := append([]string(nil), reported...)
	mu.Unlock()
	if len(got) != 1 || got[0] != want {
		t.Fatalf("reported at the failed write: %v, want [%s]", got, want)
	}
	for range 3 {
		w.cycle(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 {
		t.Errorf("reported %v over later cycles, want once", reported)
	}
	line := logs.String()
	if n := strings.Count(line, "lease item cannot be read"); n != 1 || !strings.Contains(line, "leaseKey="+shard) || !strings.Contains(line, "fix=") {
		t.Errorf("want one ERROR line with leaseKey and fix, got %d:\n%s", n, line)
	}
}

// put writes a raw item.
func put(t *testing.T, db *dynamodb.Client, table string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// String returns everything written.
func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const (
	seq1 = "49590338271490256608559692538361571095921575989136588898"
	seq2 = "49590338271490256608559692538361571095921575989136588899"
)

// reshardedShards returns a parent and its two children.
func reshardedShards() (parent ShardInfo, children []ShardInfo) {
	parent = ShardInfo{ID: "shardId-000000000000"}
	return parent, []ShardInfo{
		{ID: "shardId-000000000001", ParentIDs: []string{parent.ID}},
		{ID: "shardId-000000000002", ParentIDs: []string{parent.ID}},
	}
}

// TestCoordinatorFinishedLeaseDeleted reads a parent to SHARD_END and
// checks its lease is deleted once, and only once, both children's leases
// have begun (a checkpoint past their start), as the KCL's lease clean-up
// does, and that a shard sync, which still lists the parent, does not
// create it again; the worker keeps its leases through the loss of the
// beat board's item (the parent's).
func TestCoordinatorFinishedLeaseDeleted(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "w1", db, nil)
	parent, children := reshardedShards()
	all := append([]ShardInfo{parent}, children...)
	if err := w.c.SyncShards(ctx, all); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	if err := w.c.Commit(ctx, parent.ID, checkpointer.ShardEnd); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	if got := w.held(); len(got) != 2 {
		t.Fatalf("held %v, want both children", got)
	}
	items := func() int {
		leases, err := w.c.Table().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(leases)
	}
	for i, c := range children {
		w.c.scanCycle(ctx)
		if n := items(); n != 3 {
			t.Fatalf("with %d of 2 children begun: %d lease items, want 3 (the parent kept)", i, n)
		}
		if err := w.c.Commit(ctx, c.ID, seq1); err != nil {
			t.Fatal(err)
		}
	}
	w.c.scanCycle(ctx)
	if n := items(); n != 2 {
		t.Fatalf("both children begun: %d lease items, want 2 (the parent deleted)", n)
	}
	if err := w.c.SyncShards(ctx, all); err != nil {
		t.Fatal(err)
	}
	if n := items(); n != 2 {
		t.Errorf("after a shard sync listing the parent: %d lease items, want 2", n)
	}
	for range 4 {
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.cycle(ctx)
	}
	for _, c := range children {
		if !w.c.Holds(c.ID) {
			t.Errorf("lost %s after the board's item went", c.ID)
		}
	}
}

// TestCoordinatorDeletedLeaseNotSkipped deletes lease items by hand and
// checks a shard sync creates them again where no record is skipped: a
// lease the worker held at the checkpoint it wrote (the holder stops
// reading at the scan that misses it), and a child whose parent's lease
// was cleaned up (the shard list no longer names the parent) at
// TRIM_HORIZON, never at the initial position LATEST.
func TestCoordinatorDeletedLeaseNotSkipped(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	del := func(t *testing.T, table, shard string) {
		t.Helper()
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: keyOf(shard)}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("held", func(t *testing.T) {
		w := newWorker(t, table, "w1", db, nil)
		shards := []ShardInfo{{ID: "shardId-000000000009"}}
		if err := w.c.SyncShards(ctx, shards); err != nil {
			t.Fatal(err)
		}
		w.cycle(ctx)
		if err := w.c.Commit(ctx, shards[0].ID, seq1); err != nil {
			t.Fatal(err)
		}
		del(t, table, shards[0].ID)
		w.c.scanCycle(ctx)
		w.c.deliver()
		if _, lost := w.events(); len(lost) != 1 {
			t.Errorf("lost %v after its item was deleted, want the shard", lost)
		}
		if err := w.c.SyncShards(ctx, shards); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, w.c.Table(), shards[0].ID).Checkpoint; got != seq1 {
			t.Errorf("recreated at %s, want the checkpoint written, %s", got, seq1)
		}
	})
	t.Run("child of a cleaned-up parent", func(t *testing.T) {
		parent, children := reshardedShards()
		w := newWorker(t, table+"2", "w1", db, nil)
		if err := w.c.SyncShards(ctx, append([]ShardInfo{parent}, children...)); err != nil {
			t.Fatal(err)
		}
		w.cycle(ctx)
		if err := w.c.Commit(ctx, parent.ID, checkpointer.ShardEnd); err != nil {
			t.Fatal(err)
		}
		w2 := newWorker(t, table+"2", "w2", db, nil)
		if err := w2.c.SyncShards(ctx, append([]ShardInfo{parent}, children...)); err != nil {
			t.Fatal(err) // w2 sees the parent at SHARD_END
		}
		// Another worker read the children and the parent's lease was
		// cleaned up, the stream no longer lists the parent (past
		// retention), and a child's lease is deleted by hand.
		del(t, table+"2", parent.ID)
		del(t, table+"2", children[0].ID)
		w2.c.scanCycle(ctx) // notices the deletion
		if err := w2.c.SyncShards(ctx, children); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, w.c.Table(), children[0].ID).Checkpoint; got != checkpointer.TrimHorizon {
			t.Errorf("recreated at %s, want %s", got, checkpointer.TrimHorizon)
		}
	})
}

// TestDeletedUnfinishedParentCreatedAgain deletes by hand the lease of a
// parent checkpointed half way while its children's leases exist (the
// shard sync created them at TRIM_HORIZON): the parent's lease must be
// created again, at the checkpoint the worker that read it knows, and no
// worker may take a child before the parent ends, or the parent's last
// records are never read.
func TestDeletedUnfinishedParentCreatedAgain(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	parent := ShardInfo{ID: "shardId-000000000000"}
	shards := []ShardInfo{parent,
		{ID: "shardId-000000000001", ParentIDs: []string{parent.ID}},
		{ID: "shardId-000000000002", ParentIDs: []string{parent.ID}}}
	w1 := newWorker(t, table, "w1", db, nil)
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	if err := w1.c.Commit(ctx, parent.ID, seq1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: keyOf(parent.ID)}); err != nil {
		t.Fatal(err)
	}
	w2 := newWorker(t, table, "w2", db, nil) // a restarted worker: knows no checkpoint
	if err := w2.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w2.cycle(ctx) // before the parent's lease exists again
	for _, s := range w2.held() {
		if s != parent.ID {
			t.Errorf("w2 took child %s while its parent's lease was gone, not ended", s)
		}
	}
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	l, ok, err := w1.c.Table().Get(ctx, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("the unfinished parent's lease was not created again")
	}
	if l.Checkpoint != seq1 && l.Checkpoint != "TRIM_HORIZON" {
		t.Errorf("the parent's lease created again at %s; want the checkpoint w1 knows (%s) or TRIM_HORIZON", l.Checkpoint, seq1)
	}
}
