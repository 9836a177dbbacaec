package kinesistest_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
	"github.com/weirstream/weir/stream"
)

// delivered gathers what a pipeline's output saw, and the recomputations of
// its blocks.
type delivered struct {
	want int
	done chan struct{} // closed once want records were delivered

	mu         sync.Mutex
	records    []kinesis.Record
	recomputes int
	problems   []string
}

func (d *delivered) batch(ctx context.Context, r *kinesis.Receiver, b *batch.Batch[kinesis.Record]) error {
	parts := b.Parts()
	for i, info := range b.Blocks() {
		again, err := r.Recompute(ctx, info)
		d.mu.Lock()
		d.recomputes++
		switch {
		case err != nil:
			d.problems = append(d.problems, fmt.Sprintf("recompute block %v: %v", info.ID, err))
		case i >= len(parts):
			d.problems = append(d.problems, fmt.Sprintf("block %v has no part", info.ID))
		default:
			if diff := cmp.Diff(parts[i], again); diff != "" {
				d.problems = append(d.problems, fmt.Sprintf("recompute of block %v differs (-delivered +recomputed):\n%s", info.ID, diff))
			}
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	before := len(d.records)
	d.records = slices.AppendSeq(d.records, b.All())
	if before < d.want && len(d.records) >= d.want {
		close(d.done)
	}
	return nil
}

// TestPipelineEndToEnd runs a weir pipeline on the fake in virtual time:
// records put while it runs, a shard split mid-run, throttled calls and
// expired iterators; every record is delivered exactly once, in order per
// shard, and every block recomputes to the same records.
func TestPipelineEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := kinesistest.New()
		if err := fake.CreateStream("orders", 2); err != nil {
			t.Fatal(err)
		}
		const n = 600
		put := func(from, to int) {
			for i := from; i < to; i++ {
				if _, _, err := fake.Put("orders", fmt.Sprintf("customer-%d", i%37), fmt.Appendf(nil, "order-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		put(0, 200)

		sc, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r, err := kinesis.New(kinesis.Config{
			Stream: "orders", App: "test", Client: fake,
			InitialPosition:   kinesis.TrimHorizon,
			PollInterval:      100 * time.Millisecond,
			ShardSyncInterval: time.Second,
			RecordsPerRead:    50,
		})
		if err != nil {
			t.Fatal(err)
		}
		d := &delivered{want: n, done: make(chan struct{})}
		stream.ForEachBatch(stream.From(sc, r), func(ctx context.Context, b *batch.Batch[kinesis.Record]) error {
			return d.batch(ctx, r, b)
		})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ran := make(chan error, 1)
		go func() { ran <- sc.Run(ctx) }()

		time.Sleep(1500 * time.Millisecond)
		if _, _, err := fake.SplitShard("orders", "shardId-000000000000"); err != nil {
			t.Fatal(err)
		}
		put(200, 400)
		for _, op := range []string{kinesistest.OpGetRecords, kinesistest.OpGetShardIterator, kinesistest.OpListShards} {
			if err := fake.InjectThrottling(op, 3); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		fake.ExpireIterators()
		put(400, n)
		time.Sleep(time.Second)
		fake.ExpireIterators()

		select {
		case <-d.done:
		case <-time.After(10 * time.Minute): // virtual: a failure guard
			t.Fatal("not every record was delivered within 10 minutes of virtual time")
		}
		sc.Drain(context.Background())
		if err := <-ran; err != nil {
			t.Fatalf("Run: %v", err)
		}

		d.mu.Lock()
		defer d.mu.Unlock()
		for _, p := range d.problems {
			t.Error(p)
		}
		checkExactlyOnceInOrder(t, n, d.records)
		if d.recomputes == 0 {
			t.Error("no block was recomputed")
		}
		st := r.Stats()
		for _, cause := range []string{"throttled", "limit_exceeded", "expired_iterator"} {
			if st.Retries[cause] == 0 {
				t.Errorf("Stats.Retries[%s] = 0, want the injected faults retried", cause)
			}
		}
		t.Logf("%d records, %d blocks recomputed, %d GetRecords calls, retries %v", len(d.records), d.recomputes, fake.Calls(kinesistest.OpGetRecords), st.Retries)
	})
}

// checkExactlyOnceInOrder wants "order-0" to "order-<n-1>" each once, and
// the records of each shard in sequence number order.
func checkExactlyOnceInOrder(t *testing.T, n int, recs []kinesis.Record) {
	t.Helper()
	seen := map[string]int{}
	last := map[string]string{}
	for _, r := range recs {
		seen[string(r.Data)]++
		if prev, ok := last[r.ShardID]; ok && batch.CompareSeq(prev, r.SequenceNumber) >= 0 {
			t.Errorf("shard %s: %s delivered after %s", r.ShardID, r.SequenceNumber, prev)
		}
		last[r.ShardID] = r.SequenceNumber
	}
	for i := range n {
		if c := seen[fmt.Sprintf("order-%d", i)]; c != 1 {
			t.Errorf("order-%d delivered %d times, want 1", i, c)
		}
	}
	if len(recs) != n {
		t.Errorf("%d records delivered, want %d", len(recs), n)
	}
	if len(last) != 4 { // shards 0 and 1, and the two children of 0
		t.Errorf("records came from shards %v, want 4 shards", slices.Sorted(maps.Keys(last)))
	}
}
