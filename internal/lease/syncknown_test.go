package lease

import (
	"testing"

	"github.com/weirstream/weir/internal/localaws"
)

// TestSyncShardsSkipsTheTableForAFinishedListedParent: after a reshard, a
// parent read to its end has its lease deleted once a child began
// (finishedLeases), while Kinesis lists it for the retention period. A
// shard sync must not read the whole table each time for it (the table is
// read only for a listed shard without a lease): it is finished for good,
// as the first sync that read the table learned.
func TestSyncShardsSkipsTheTableForAFinishedListedParent(t *testing.T) {
	ctx := t.Context()
	count := &countingDB{DynamoDBAPI: servers.Env(t).DynamoDB()}
	w := newWorker(t, localaws.UniqueName(t), "w1", count, nil)
	const parent = "shardId-parent"
	list := []ShardInfo{{ID: parent},
		{ID: "shardId-child-1", ParentIDs: []string{parent}}, {ID: "shardId-child-2", ParentIDs: []string{parent}}}
	// The parent's lease deleted, finished; a child began.
	for i, s := range list[1:] {
		ckpt := "49590338271490256608559692538361571095921575989136588898"
		if i > 0 {
			ckpt = ""
		}
		if _, err := w.c.Table().Create(ctx, Lease{Shard: s.ID, Parents: s.ParentIDs, Checkpoint: ckpt}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.c.SyncShards(ctx, list); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	scans0, _, _, _ := count.counts()
	for range 3 {
		if err := w.c.SyncShards(ctx, list); err != nil {
			t.Fatal(err)
		}
	}
	if scans, _, _, _ := count.counts(); scans != scans0 {
		t.Errorf("3 shard syncs read the table %d times, want 0: every lease of the listed shards was seen, the parent's deleted as finished", scans-scans0)
	}
	if _, ok, err := w.c.Table().Get(ctx, parent); err != nil || ok {
		t.Errorf("the finished parent's lease was created again (%v, %v)", ok, err)
	}
}
