package stream

import (
	"fmt"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/lineage"
	"github.com/weirstream/weir/source/memory"
)

// heldLeases is a memory source that holds leases as weir's Kinesis
// receiver does: ShardAncestors walks, under a lock, every lease held and
// its shard's ancestors in the shard list, as kinesis.Receiver does
// through lease.Coordinator.Ancestors.
type heldLeases struct {
	*memory.Source[string]
	mu     *sync.Mutex
	held   []lease.Lease
	listed map[string][]string // shard -> its parents, as the shard list names them
}

// ShardAncestors walks the leases held as lease.Coordinator.Ancestors
// does, and names the ancestors of those of "src", nearest first.
func (h heldLeases) ShardAncestors(stream string) map[string][]string {
	if stream != "src" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]string{}
	for _, l := range h.held {
		if len(l.Parents) == 0 {
			continue
		}
		seen := map[string]bool{l.Shard: true}
		var as []string
		for next, i := l.Parents, 0; ; i++ {
			for _, p := range next {
				if !seen[p] && len(as) < lineage.MaxAncestors {
					seen[p] = true
					as = append(as, p)
				}
			}
			if i == len(as) {
				break
			}
			next = h.listed[as[i]]
		}
		out[l.Shard] = as
	}
	return out
}

// BenchmarkBatchLineage measures what an output writing with
// sink/dynamodb spends per batch finding the ancestors of its records'
// shards, on a worker holding n leases whose batch has records of each,
// each shard a split's child whose parent came of a merge.
func BenchmarkBatchLineage(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			p, err := NewPipeline(Config{BatchInterval: 1e9})
			if err != nil {
				b.Fatal(err)
			}
			src, err := memory.New[string](memory.Config{})
			if err != nil {
				b.Fatal(err)
			}
			h := heldLeases{Source: src, mu: new(sync.Mutex), listed: make(map[string][]string)}
			shards := make([]string, n)
			for i := range shards {
				shards[i] = fmt.Sprintf("shardId-%012d", i+n)
				h.held = append(h.held, lease.Lease{Shard: shards[i], Owner: "worker-1", Counter: 42,
					Checkpoint: "49590338271490256608559692538361571095921575989136588898", WeirCheckpoint: "49590338271490256608559692538361571095921575989136588898",
					Parents: []string{fmt.Sprintf("shardId-%012d", i)}, StartingHashKey: "0", EndingHashKey: "340282366920938463463374607431768211455"})
				h.listed[fmt.Sprintf("shardId-%012d", i)] = []string{fmt.Sprintf("merged-%012d", 2*i), fmt.Sprintf("merged-%012d", 2*i+1)}
			}
			From[string](p, h)
			b.ReportAllocs()
			for b.Loop() {
				ancestors := p.shardAncestors("src")
				for _, s := range shards {
					if len(ancestors[s]) != 3 {
						b.Fatal("not 3 ancestors")
					}
				}
			}
		})
	}
}
