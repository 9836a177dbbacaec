package kinesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

// TestRecomputeReadsShardsAtOnce recomputes, on kinesalite, blocks of
// ranges of 2 shards (those a receiver pushed, see mixShards): the first
// alone, whose ranges of both shards must be read at the same time (the
// first GetRecords of a shard waits until the other shard has one in
// flight, which a range by range Recompute never gets to, failing at
// RecomputeTimeout), then the others all at once, which must never have
// two calls on one shard at a time. Every block must come back as it was
// read.
func TestRecomputeReadsShardsAtOnce(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	stream := newStream(t, env, 2)
	data := payloads("s", 600)
	if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(env, stream)
	cfg.RecordsPerRead = 40 // several ranges per shard and per block
	run := startReceiver(t, cfg, len(data))
	run.wait(t)
	run.stop(t)
	blocks := mixShards(run.c.snapshot())
	if len(blocks) == 0 {
		t.Fatal("no block holds ranges of both shards")
	}

	var (
		mu        sync.Mutex
		inFlight  = map[string]int{}
		maxShard  int // most calls on one shard at a time
		started   = map[string]bool{}
		bothReady = make(chan struct{})
		shardOf   = map[string]string{} // iterator to shard
	)
	hook := &hookClient{Client: env.Kinesis()}
	hook.getShardIterator = func(ctx context.Context, in *awskinesis.GetShardIteratorInput, next Client) (*awskinesis.GetShardIteratorOutput, error) {
		out, err := next.GetShardIterator(ctx, in)
		if err == nil {
			mu.Lock()
			shardOf[aws.ToString(out.ShardIterator)] = aws.ToString(in.ShardId)
			mu.Unlock()
		}
		return out, err
	}
	hook.getRecords = func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error) {
		mu.Lock()
		shard := shardOf[aws.ToString(in.ShardIterator)]
		inFlight[shard]++
		maxShard = max(maxShard, inFlight[shard])
		if !started[shard] {
			started[shard] = true
			if len(started) == 2 {
				close(bothReady)
			}
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[shard]--
			mu.Unlock()
		}()
		select {
		case <-bothReady:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		out, err := next.GetRecords(ctx, in)
		if err == nil && out.NextShardIterator != nil {
			mu.Lock()
			shardOf[aws.ToString(out.NextShardIterator)] = shard
			mu.Unlock()
		}
		return out, err
	}
	rcfg := baseConfig(env, stream)
	rcfg.Client, rcfg.RecomputeTimeout = hook, 10*time.Second
	r, err := New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]Record, len(blocks))
	errs := make([]error, len(blocks))
	// The first block alone: only its own ranges can open the gate.
	got[0], errs[0] = r.Recompute(t.Context(), blocks[0].info)
	var wg sync.WaitGroup
	for i, b := range blocks[1:] {
		wg.Go(func() { got[i+1], errs[i+1] = r.Recompute(t.Context(), b.info) })
	}
	wg.Wait()
	for i, b := range blocks {
		if errs[i] != nil {
			t.Fatalf("Recompute(%v): %v", b.info.ID, errs[i])
		}
		if diff := cmp.Diff(b.records, got[i]); diff != "" {
			t.Fatalf("Recompute(%v) (-want +got):\n%s", b.info.ID, diff)
		}
	}
	if maxShard != 1 {
		t.Errorf("%d GetRecords calls on one shard at a time, want 1", maxShard)
	}
	if n := len(r.turns.turns); n != 0 {
		t.Errorf("%d shard turns left after every Recompute returned", n)
	}
}

// mixShards returns the blocks that hold ranges of several
// shards, and blocks made of a block of one shard followed by a block of
// another, as a receiver reading both in a block interval makes them.
func mixShards(blocks []pushed) []pushed {
	var mixed []pushed
	var byShard [][]pushed // blocks of one shard each, by shard
	index := map[string]int{}
	for _, b := range blocks {
		shard := b.info.Ranges[0].Shard
		one := true
		for _, r := range b.info.Ranges {
			one = one && r.Shard == shard
		}
		if !one {
			mixed = append(mixed, b)
			continue
		}
		i, ok := index[shard]
		if !ok {
			i = len(byShard)
			index[shard] = i
			byShard = append(byShard, nil)
		}
		byShard[i] = append(byShard[i], b)
	}
	for len(byShard) >= 2 && len(byShard[0]) > 0 && len(byShard[1]) > 0 {
		a, b := byShard[0][0], byShard[1][0]
		byShard[0], byShard[1] = byShard[0][1:], byShard[1][1:]
		info := batch.BlockInfo{ID: batch.BlockID{Seq: uint64(1000 + len(mixed))},
			Ranges: append(slices.Clone(a.info.Ranges), b.info.Ranges...), Count: a.info.Count + b.info.Count}
		mixed = append(mixed, pushed{info: info, records: append(slices.Clone(a.records), b.records...)})
	}
	return mixed
}

// TestRecomputeGoesOnAcrossAdjacentRanges recomputes, on kinesalite, the
// ranges of one shard's consecutive blocks: as one block, whose ranges
// after the first must go on with the iterator the range before ended
// with (one GetShardIterator in all); as one block that skips a range,
// whose range after the gap must not take the records of the gap (it gets
// an iterator of its own); and as their own blocks all at once. Every
// block must come back with exactly its own records, in order.
func TestRecomputeGoesOnAcrossAdjacentRanges(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	data := payloads("a", 300)
	if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(env, stream)
	cfg.RecordsPerRead = 40 // a range per page, several blocks
	run := startReceiver(t, cfg, len(data))
	run.wait(t)
	run.stop(t)
	var blocks []pushed
	for _, b := range run.c.snapshot() {
		if b.info.Count > 0 {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) < 3 {
		t.Fatalf("%d blocks, want at least 3", len(blocks))
	}
	var iterators sync.Map // Recompute's GetShardIterator calls, by block
	counted := func(id batch.BlockID) *atomic.Int64 {
		n, _ := iterators.LoadOrStore(id, new(atomic.Int64))
		return n.(*atomic.Int64)
	}
	hook := &hookClient{Client: env.Kinesis()}
	hook.getShardIterator = func(ctx context.Context, in *awskinesis.GetShardIteratorInput, next Client) (*awskinesis.GetShardIteratorOutput, error) {
		if id, ok := ctx.Value(blockKey{}).(batch.BlockID); ok {
			counted(id).Add(1)
		}
		return next.GetShardIterator(ctx, in)
	}
	rcfg := baseConfig(env, stream)
	rcfg.Client = hook
	r, err := New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	join := func(id uint64, parts ...pushed) pushed {
		j := pushed{info: batch.BlockInfo{ID: batch.BlockID{Seq: id}}}
		for _, p := range parts {
			j.info.Ranges = append(j.info.Ranges, p.info.Ranges...)
			j.info.Count += p.info.Count
			j.records = append(j.records, p.records...)
		}
		return j
	}
	recompute := func(b pushed) error {
		got, err := r.Recompute(context.WithValue(t.Context(), blockKey{}, b.info.ID), b.info)
		if err != nil {
			return fmt.Errorf("Recompute(%v): %w", b.info.ID, err)
		}
		if diff := cmp.Diff(b.records, got); diff != "" {
			return fmt.Errorf("Recompute(%v) (-want +got):\n%s", b.info.ID, diff)
		}
		return nil
	}

	all := join(1000, blocks...)
	if err := recompute(all); err != nil {
		t.Fatal(err)
	}
	if n := counted(all.info.ID).Load(); n != 1 {
		t.Errorf("%d ranges in a row: %d GetShardIterator calls, want 1", len(all.info.Ranges), n)
	}
	gap := join(1001, blocks[0], blocks[2])
	if err := recompute(gap); err != nil {
		t.Fatal(err)
	}
	if n, want := counted(gap.info.ID).Load(), int64(len(gap.info.Ranges)); n != want {
		t.Errorf("ranges with a gap: %d GetShardIterator calls, want %d", n, want)
	}

	errs := make([]error, len(blocks))
	var wg sync.WaitGroup
	for i, b := range blocks {
		wg.Go(func() { errs[i] = recompute(b) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := len(r.turns.turns); n != 0 {
		t.Errorf("%d shard turns left after every Recompute returned", n)
	}
}

// blockKey is the context key under which the test names the block a
// Recompute call is for.
type blockKey struct{}
