package kinesis_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// A keyed count declared partitioned by its key (stream.PartitionedBy)
// keeps its state per shard, and the state moves with the shard's lease:
// one worker counts the first records and drains, a second counts the
// next, is stopped at once (no drain: a crash for the lease table), and a
// third takes the leases once they expire and counts the rest. Every
// key's count, the greatest any worker wrote, is exact: a state split
// between workers would leave it short, a record counted twice long.
func TestLeasesStatePerShardMovesWithLease(t *testing.T) {
	f := newFleet(t, 4)
	const keys, perRound = 24, 3
	var mu sync.Mutex
	best := map[string]int{} // per key, the greatest count written
	worker := func(id string) (*stream.Pipeline, chan error) {
		r, err := kinesis.New(kinesis.Config{Stream: f.stream, App: "pershard", InitialPosition: kinesis.TrimHorizon,
			Client: f.env.Kinesis(), PollInterval: 20 * time.Millisecond, ShardSyncInterval: 300 * time.Millisecond, Logger: testLogger(),
			Leases: &leasetable.Config{TableName: f.table, DynamoDB: f.env.DynamoDB(), WorkerID: id,
				LeaseDuration: 2 * time.Second, CheckpointInterval: 100 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, BlockInterval: 20 * time.Millisecond, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		pairs := stream.Map(stream.From(p, r), func(rec kinesis.Record) stream.Pair[string, int] {
			return stream.Pair[string, int]{Key: rec.PartitionKey, Value: 1}
		})
		counts := stream.UpdateStateByKey(stream.PartitionedBy(pairs, func(k string) string { return k }),
			func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
		stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
			mu.Lock()
			for kv := range b.All() {
				best[kv.Key] = max(best[kv.Key], kv.Value)
			}
			mu.Unlock()
			select {
			case f.tick <- struct{}{}:
			default:
			}
			return nil
		})
		done := make(chan error, 1)
		go func() { done <- p.Run(context.WithoutCancel(t.Context())) }()
		return p, done
	}
	round := 0
	put := func() {
		round++
		data := make([][]byte, keys*perRound)
		for i := range data {
			data[i] = []byte(strconv.Itoa(i))
		}
		if err := f.env.PutRecords(t.Context(), f.stream, data, func(i int) string { return "k" + strconv.Itoa(i%keys) }); err != nil {
			t.Fatal(err)
		}
	}
	exact := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k := range keys {
			if best["k"+strconv.Itoa(k)] != perRound*round {
				return false
			}
		}
		return true
	}
	check := func(when string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for k := range keys {
			if n := best["k"+strconv.Itoa(k)]; n != perRound*round {
				t.Errorf("%s: count of k%d: %d, want %d", when, k, n, perRound*round)
			}
		}
	}

	// Worker a counts the first round and drains: snapshots stored, then
	// the last checkpoints, then the leases handed back.
	put()
	a, aDone := worker("a")
	f.waitFor("a counts round 1", exact)
	if err := a.Drain(t.Context()); err != nil {
		t.Fatalf("a: Drain: %v", err)
	}
	if err := <-aDone; err != nil {
		t.Fatalf("a: Run: %v", err)
	}
	check("after a")

	// Worker b takes every lease, loads the states and counts round 2 on
	// top of them; then it stops at once, without a drain.
	b, bDone := worker("b")
	put()
	f.waitFor("b counts rounds 1-2", exact)
	b.Stop()
	<-bDone
	check("after b")

	// Worker c takes the leases once they expire, loads what b stored
	// (the checkpoints stop at it) and counts round 3 on top.
	put()
	c, cDone := worker("c")
	f.waitFor("c counts rounds 1-3", exact)
	if err := c.Drain(t.Context()); err != nil {
		t.Fatalf("c: Drain: %v", err)
	}
	if err := <-cDone; err != nil {
		t.Fatalf("c: Run: %v", err)
	}
	check("after c")
}
