package kinesis_test

import (
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/lease"
)

// TestLeasesShardGoneFromStream starts a worker on a lease table that
// holds the lease of a shard the stream no longer has (a closed parent
// whose records all passed the retention period before it was read to
// its end) and of its child, which waits for it. As the KCL does, the gone
// shard is read to its end at once (it has no record left to read):
// marked SHARD_END, so that its child is read, rather than failing Run at
// every start.
func TestLeasesShardGoneFromStream(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFleet(t, 1)
	data := payloads("child", 50)
	f.put(data)
	const gone = "shardId-000000000007"
	child := f.shards()[0]
	tbl, err := lease.NewTable(lease.TableConfig{Name: f.table, Client: f.env.DynamoDB(), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range []lease.Lease{
		{Shard: gone, Checkpoint: "49590338271490256608559692538361571095921575989136588898"},
		{Shard: *child.ShardId, Checkpoint: checkpointer.TrimHorizon, Parents: []string{gone}},
	} {
		if _, err := tbl.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	w := f.start("w1", time.Second, nil)
	guard := time.NewTimer(deadline)
	defer guard.Stop()
	for !f.allDelivered(data)() {
		select {
		case <-w.done:
			t.Fatalf("Run returned before the child's records were delivered: %v", w.runErr)
		case <-f.tick:
		case <-guard.C:
			t.Fatalf("not within %v: the child's records delivered", deadline)
		}
	}
	if l := f.leases()[gone]; l.Checkpoint != checkpointer.ShardEnd {
		t.Errorf("the gone shard's lease is at %q, want %s", l.Checkpoint, checkpointer.ShardEnd)
	}
	w.drain(t)
}
