package lease

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/lineage"
	"github.com/weirstream/weir/internal/localaws"
)

// BenchmarkTableCheckpoint measures one conditional checkpoint write on
// dynalite, the checkpointer.Committer's cost in a round.
func BenchmarkTableCheckpoint(b *testing.B) {
	db := servers.Env(b).DynamoDB()
	tbl, err := NewTable(TableConfig{Name: localaws.UniqueName(b), Client: db, PollInterval: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := tbl.Ensure(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := tbl.Create(ctx, Lease{Shard: "s", Owner: "w"}); err != nil {
		b.Fatal(err)
	}
	l := Lease{Shard: "s", Owner: "w"}
	n := int64(0)
	for b.Loop() {
		n++
		if l, err = tbl.Checkpoint(ctx, l, strconv.FormatInt(n, 10), 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchLineage measures what an output writing with
// sink/dynamodb spends per batch finding the ancestors of its records'
// shards (lineage.Ancestors, through kinesis.Receiver.ShardAncestors), on
// a worker holding n leases whose batch has records of each, each shard a
// split's child whose parent came of a merge, as the shard list names
// them. The tree does not change between batches.
func BenchmarkBatchLineage(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			c := &Coordinator{held: make(map[string]*heldLease), seen: make(map[string]seenLease)}
			var list []ShardInfo
			shards := make([]string, n)
			for i := range shards {
				shards[i] = fmt.Sprintf("shardId-%012d", i+n)
				parent := fmt.Sprintf("shardId-%012d", i)
				merged := []string{fmt.Sprintf("merged-%012d", 2*i), fmt.Sprintf("merged-%012d", 2*i+1)}
				list = append(list, ShardInfo{ID: merged[0]}, ShardInfo{ID: merged[1]}, ShardInfo{ID: parent, ParentIDs: merged},
					ShardInfo{ID: shards[i], ParentIDs: []string{parent}})
				c.held[shards[i]] = &heldLease{lease: Lease{Shard: shards[i], Owner: "worker-1", Counter: 42,
					Checkpoint: "49590338271490256608559692538361571095921575989136588898", WeirCheckpoint: "49590338271490256608559692538361571095921575989136588898",
					Parents: []string{parent}, StartingHashKey: "0", EndingHashKey: "340282366920938463463374607431768211455"}}
			}
			c.learnChildren(list)
			b.ReportAllocs()
			for b.Loop() {
				ancestors := c.Ancestors(lineage.MaxAncestors)
				for _, s := range shards {
					if len(ancestors[s]) != 3 {
						b.Fatal("not 3 ancestors")
					}
				}
			}
		})
	}
}
