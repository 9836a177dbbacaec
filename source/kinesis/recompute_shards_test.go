package kinesis

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/google/go-cmp/cmp"
)

// TestRecomputeReadsShardsAtOnce recomputes, on kinesalite, every block a
// receiver pushed from 2 shards, all blocks at once: a block's ranges of
// both shards must be read at the same time (the first GetRecords of a
// shard waits until the other shard has one in flight, which a range by
// range Recompute never gets to, failing at RecomputeTimeout), never two
// calls on one shard at a time, even from different Recompute calls, and
// every block must come back as it was pushed.
func TestRecomputeReadsShardsAtOnce(t *testing.T) {
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
	blocks := run.c.snapshot()
	both := 0
	for _, b := range blocks {
		shards := map[string]bool{}
		for _, r := range b.info.Ranges {
			shards[r.Shard] = true
		}
		if len(shards) == 2 {
			both++
		}
	}
	if both == 0 {
		t.Fatalf("no block of %d holds ranges of both shards", len(blocks))
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
	var wg sync.WaitGroup
	for i, b := range blocks {
		wg.Go(func() { got[i], errs[i] = r.Recompute(t.Context(), b.info) })
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
