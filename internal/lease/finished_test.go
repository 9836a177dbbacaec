package lease

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// TestCoordinatorFinishedKnowsDeletedParent finishes a parent shard and
// begins both its children with one worker, which then deletes the
// parent's lease (finishedLeases), and checks that a second worker, which
// never saw that lease, knows the parent finished (Finished) after a shard
// sync that still lists it: a worker that was down while the parent's
// lease came and went must still let its recovery log forget the parent.
// The first worker knows it too, from its own SHARD_END write, and
// neither names a child.
func TestCoordinatorFinishedKnowsDeletedParent(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 := newWorker(t, table, "w1", db, nil)
	parent, children := reshardedShards()
	all := append([]ShardInfo{parent}, children...)
	if err := w1.c.SyncShards(ctx, all); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	if err := w1.c.Commit(ctx, parent.ID, checkpointer.ShardEnd); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	for _, c := range children {
		if err := w1.c.Commit(ctx, c.ID, seq1); err != nil {
			t.Fatal(err)
		}
	}
	w1.c.scanCycle(ctx)
	if _, ok, err := w1.c.Table().Get(ctx, parent.ID); err != nil || ok {
		t.Fatalf("the parent's lease: found %v (err %v); the test needs it deleted", ok, err)
	}
	if diff := cmp.Diff([]string{parent.ID}, w1.c.Finished()); diff != "" {
		t.Errorf("w1, which marked the parent SHARD_END: Finished (-want +got):\n%s", diff)
	}

	w2 := newWorker(t, table, "w2", db, nil)
	if err := w2.c.SyncShards(ctx, all); err != nil {
		t.Fatal(err)
	}
	w2.c.scanCycle(ctx)
	got := w2.c.Finished()
	slices.Sort(got)
	if diff := cmp.Diff([]string{parent.ID}, got); diff != "" {
		t.Errorf("w2, which never saw the parent's lease: Finished (-want +got):\n%s", diff)
	}
}
