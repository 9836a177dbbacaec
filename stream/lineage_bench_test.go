package stream

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/source/memory"
)

// heldLeases is a memory source that holds leases as weir's Kinesis
// receiver does: ShardParents copies, under a lock, every lease the
// coordinator holds and then each one's public attributes, as
// kinesis.Receiver.ShardParents does through HeldLeases.
type heldLeases struct {
	*memory.Source[string]
	mu   *sync.Mutex
	held []lease.Lease
}

// ShardParents copies the leases held as kinesis.Receiver.ShardParents
// does (through HeldLeases), and names the parents of those of "src".
func (h heldLeases) ShardParents(stream string) map[string][]string {
	if stream != "src" {
		return nil
	}
	h.mu.Lock()
	held := slices.Clone(h.held)
	h.mu.Unlock()
	leases := make([]leasetable.Lease, len(held))
	for i, l := range held {
		leases[i] = l.Public()
	}
	out := map[string][]string{}
	for _, l := range leases {
		if len(l.Parents) > 0 {
			out[l.Shard] = l.Parents
		}
	}
	return out
}

// BenchmarkBatchLineage measures what an output writing with
// sink/dynamodb spends per batch finding the parents of its records'
// shards, on a worker holding n leases whose batch has records of each.
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
			h := heldLeases{Source: src, mu: new(sync.Mutex)}
			shards := make([]string, n)
			for i := range shards {
				shards[i] = fmt.Sprintf("shardId-%012d", i+n)
				h.held = append(h.held, lease.Lease{Shard: shards[i], Owner: "worker-1", Counter: 42,
					Checkpoint: "49590338271490256608559692538361571095921575989136588898", WeirCheckpoint: "49590338271490256608559692538361571095921575989136588898",
					Parents: []string{fmt.Sprintf("shardId-%012d", i)}, StartingHashKey: "0", EndingHashKey: "340282366920938463463374607431768211455"})
			}
			From[string](p, h)
			b.ReportAllocs()
			for b.Loop() {
				parents := p.shardParents("src")
				for _, s := range shards {
					if parents[s] == nil {
						b.Fatal("no parents")
					}
				}
			}
		})
	}
}
