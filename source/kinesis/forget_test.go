package kinesis

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source"
)

// completeAll reports every block c holds completed, every 100ms of
// virtual time, until ctx is done, as a driver that keeps up does.
func completeAll(ctx context.Context, r *Receiver, c *collector) {
	done := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		blocks := c.snapshot()
		var infos []batch.BlockInfo
		for _, b := range blocks[done:] {
			infos = append(infos, b.info)
		}
		done = len(blocks)
		r.blocksCompleted(ctx, infos)
	}
}

// TestShardForgottenAfterReshard checks, in virtual time on kinesalite,
// that a receiver stops reporting a shard some time after a reshard closed
// it and it was read to its end (its counters and state dropped), while its
// children stay: a stream resharded often does not grow Stats.Shards, nor
// the metric series made of it, without bound.
func TestShardForgottenAfterReshard(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	if err := env.PutRecords(t.Context(), stream, payloads("before", 10), nil); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		client := bubbleClient(env)
		cfg := Config{
			Stream: stream, App: "app", InitialPosition: TrimHorizon, Client: client,
			PollInterval: 2 * time.Second, ShardSyncInterval: 10 * time.Second,
		}
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(ctx, source.Runtime[Record]{Push: c.push, BlockInterval: 100 * time.Millisecond})
		}()
		go completeAll(ctx, r, c)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		parent := aws.ToString(splitInHalf(t, client, stream).ShardId)
		if err := localaws.PutRecordsOn(t.Context(), client, stream, payloads("after", 10), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		st := r.Stats().Shards
		if p, ok := st[parent]; !ok || !p.Drained || p.Reading {
			t.Fatalf("parent %s a minute after the split: %+v (listed %v), want drained and not read", parent, p, ok)
		}
		if len(st) != 3 {
			t.Fatalf("%d shards in Stats a minute after the split, want the parent and its 2 children", len(st))
		}
		time.Sleep(forgetShardAfter)
		synctest.Wait()
		st = r.Stats().Shards
		if _, ok := st[parent]; ok {
			t.Errorf("parent %s still in Stats.Shards %v after it was read to its end", parent, forgetShardAfter)
		}
		for id, s := range st {
			if !s.Reading {
				t.Errorf("shard %s in Stats, not read: %+v", id, s)
			}
		}
		if len(st) != 2 {
			t.Errorf("%d shards in Stats, want the 2 children", len(st))
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		cancel()
		checkExactlyOnce(t, append(payloads("before", 10), payloads("after", 10)...), c.records())
	})
}

// TestShardForgottenAfterLeavingTheListing checks, in virtual time on
// kinesalite, that a shard taken as read to its end because it left the
// stream (its records passed the retention period: Kinesis answers
// ResourceNotFoundException and ListShards leaves it out) is forgotten
// too, as a shard closed by a reshard is.
func TestShardForgottenAfterLeavingTheListing(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	if err := env.PutRecords(t.Context(), stream, payloads("r", 5), nil); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var gone atomic.Bool
		client := &hookClient{
			Client: bubbleClient(env),
			listShards: func(ctx context.Context, in *awskinesis.ListShardsInput, next Client) (*awskinesis.ListShardsOutput, error) {
				if gone.Load() {
					return &awskinesis.ListShardsOutput{}, nil
				}
				return next.ListShards(ctx, in)
			},
			getRecords: func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error) {
				if gone.Load() {
					return nil, &types.ResourceNotFoundException{Message: aws.String("Shard does not exist")}
				}
				return next.GetRecords(ctx, in)
			},
		}
		r, err := New(Config{Stream: stream, App: "app", InitialPosition: TrimHorizon, Client: client, PollInterval: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(ctx, source.Runtime[Record]{Push: c.push, BlockInterval: 100 * time.Millisecond})
		}()
		go completeAll(ctx, r, c)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		gone.Store(true)
		time.Sleep(time.Minute)
		synctest.Wait()
		st := r.Stats().Shards
		if len(st) != 1 {
			t.Fatalf("Stats.Shards %v a minute after the shard left the stream, want it, ended", st)
		}
		for id, s := range st {
			if !s.Drained || s.Reading {
				t.Fatalf("shard %s a minute after it left the stream: %+v, want drained and not read", id, s)
			}
		}
		time.Sleep(forgetShardAfter)
		synctest.Wait()
		if st := r.Stats().Shards; len(st) != 0 {
			t.Errorf("Stats.Shards %v %v after the shard left the stream, want none", st, forgetShardAfter)
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		cancel()
		checkExactlyOnce(t, payloads("r", 5), c.records())
	})
}

// TestShardLeftOutOfOneListingReadOnce checks, in virtual time on
// kinesalite, that a shard one listing leaves out (a listing cut short)
// while its reader runs is neither released nor read again from its start
// when the next listing shows it: every record is delivered once.
func TestShardLeftOutOfOneListingReadOnce(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	if err := env.PutRecords(t.Context(), stream, payloads("before", 5), nil); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var omit atomic.Bool
		client := &hookClient{
			Client: bubbleClient(env),
			listShards: func(ctx context.Context, in *awskinesis.ListShardsInput, next Client) (*awskinesis.ListShardsOutput, error) {
				if omit.CompareAndSwap(true, false) {
					return &awskinesis.ListShardsOutput{}, nil
				}
				return next.ListShards(ctx, in)
			},
		}
		r, err := New(Config{Stream: stream, App: "app", InitialPosition: TrimHorizon, Client: client, PollInterval: 2 * time.Second, ShardSyncInterval: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(ctx, source.Runtime[Record]{Push: c.push, BlockInterval: 100 * time.Millisecond})
		}()
		go completeAll(ctx, r, c)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		omit.Store(true)
		time.Sleep(time.Minute) // the listing without the shard, then those with it
		synctest.Wait()
		if err := localaws.PutRecordsOn(t.Context(), client.Client.(*awskinesis.Client), stream, payloads("after", 5), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(forgetShardAfter + time.Minute)
		synctest.Wait()
		if st := r.Stats().Shards; len(st) != 1 {
			t.Errorf("Stats.Shards %v, want the shard read", st)
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		cancel()
		checkExactlyOnce(t, append(payloads("before", 5), payloads("after", 5)...), c.records())
	})
}
