package kinesis

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
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

// TestThrottlingWarnedOncePerEpisode checks, in virtual time on kinesalite,
// that a reader whose GetRecords calls are throttled on and off for minutes
// (six times out of seven, as when it catches up on large records at a
// shard's 2 MB/s) warns once that its calls are throttled and once, with
// the count, when they no longer are, instead of twice every few seconds.
func TestThrottlingWarnedOncePerEpisode(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	synctest.Test(t, func(t *testing.T) {
		var throttling atomic.Bool
		var calls, throttled atomic.Int64
		client := &hookClient{
			Client: bubbleClient(env),
			getRecords: func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error) {
				if n := calls.Add(1); throttling.Load() && n%7 != 0 {
					throttled.Add(1)
					return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}
				}
				return next.GetRecords(ctx, in)
			},
		}
		h := &logged{}
		r, err := New(Config{Stream: stream, App: "app", InitialPosition: TrimHorizon, Client: client, Logger: slog.New(h)})
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		errc := make(chan error, 1)
		go func() { errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push}) }()
		throttling.Store(true)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		throttling.Store(false)
		if err := localaws.PutRecordsOn(t.Context(), client.Client.(*awskinesis.Client), stream, payloads("r", 10), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		var warned []loggedRecord
		for _, rec := range h.records() {
			if strings.Contains(rec.msg, "throttl") || rec.attrs["cause"] == string(causeThrottled) {
				warned = append(warned, rec)
			}
		}
		for _, rec := range warned {
			t.Logf("%s %v", rec.msg, rec.attrs)
		}
		n := throttled.Load()
		if n < 100 {
			t.Fatalf("%d calls throttled, want a few minutes of them", n)
		}
		if len(warned) != 2 {
			t.Fatalf("%d warnings about throttling for %d throttled calls, want 2: its start and its end", len(warned), n)
		}
		if got := warned[1].attrs["throttled"]; got != strconv.FormatInt(n, 10) {
			t.Errorf("the end of the throttling counts %s throttled calls, want %d", got, n)
		}
		if warned[0].attrs["fix"] == "" || warned[0].attrs["shard"] == "" {
			t.Errorf("the throttling warning names no shard or fix: %v", warned[0].attrs)
		}
		checkExactlyOnce(t, payloads("r", 10), c.records())
	})
}

// TestRecomputeThrottlingEnds checks, on kinesalite, that Recompute whose
// reads were throttled long enough to warn also logs the end of that
// throttling, with its count, when it returns: its calls are its own, so
// no later call of the shard would end the episode.
func TestRecomputeThrottlingEnds(t *testing.T) {
	cfg, block := readBlock(t)
	var throttled atomic.Int64
	h := &logged{}
	cfg.Logger = slog.New(h)
	cfg.Client = &hookClient{
		Client: cfg.Client,
		getRecords: func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error) {
			if throttled.Add(1) <= 6 {
				return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}
			}
			return next.GetRecords(ctx, in)
		},
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Recompute(t.Context(), block)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != block.Count {
		t.Errorf("Recompute gave %d records, want %d", len(got), block.Count)
	}
	var msgs []string
	for _, rec := range h.records() {
		if strings.Contains(rec.msg, "throttled") {
			msgs = append(msgs, rec.msg+" throttled="+rec.attrs["throttled"])
		}
	}
	if len(msgs) != 2 || !strings.HasSuffix(msgs[1], "throttled=6") {
		t.Errorf("warnings about throttling: %q, want its start and its end, with 6 throttled calls", msgs)
	}
}

// TestFanOutThrottlingEndsWhileSubscribed checks, in virtual time, that a
// fan-out reader whose subscriptions were throttled long enough to warn
// logs the end of that throttling a minute after, while its next
// subscription delivers events, not only when that subscription ends (up
// to 5 minutes later).
func TestFanOutThrottlingEndsWhileSubscribed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		h := &logged{}
		cfg := Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake, Logger: slog.New(h),
			RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second,
			FanOut: &FanOutConfig{lifetime: 10 * time.Minute, subscribe: subs.subscribe},
		}
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push, BlockInterval: 10 * time.Millisecond})
		}()
		for range 5 {
			subs.next(t, &types.LimitExceededException{Message: aws.String("rate exceeded")}, types.ShardIteratorTypeTrimHorizon, "")
		}
		s := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
		for i := 1; i <= 30; i++ { // 2.5 minutes of events
			s.send(t, strconv.Itoa(i), i)
			time.Sleep(5 * time.Second)
		}
		synctest.Wait()
		var msgs []string
		for _, rec := range h.records() {
			if strings.Contains(rec.msg, "throttled") {
				msgs = append(msgs, rec.msg)
			}
		}
		if len(msgs) != 2 || !strings.Contains(msgs[1], "no longer throttled") {
			t.Errorf("warnings about throttling while subscribed: %q, want its start and its end", msgs)
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.end(nil)
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
	})
}

// TestRecomputedShardForgotten checks, on kinesalite, that a shard only
// Recompute read here (the blocks a restart recovers, of a shard another
// worker now reads), whose calls were retried, leaves Stats.Shards (and so
// the per-shard metrics) forgetShardAfter later, as a shard a reader read
// does; before, its retry counters kept it there for good, one entry per
// such shard per restart.
func TestRecomputedShardForgotten(t *testing.T) {
	cfg, block := readBlock(t)
	var throttled atomic.Int64
	cfg.Client = &hookClient{
		Client: cfg.Client,
		getRecords: func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error) {
			if throttled.Add(1) <= 1 {
				return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}
			}
			return next.GetRecords(ctx, in)
		},
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	shard := block.Ranges[0].Shard
	if _, err := r.Recompute(t.Context(), block); err != nil {
		t.Fatal(err)
	}
	if s := r.Stats().Shards[shard]; s.Retries[string(causeThrottled)] != 1 {
		t.Fatalf("Stats.Shards[%s] after a throttled Recompute: %+v; want its retry counted", shard, s)
	}
	t0 := time.Unix(0, 0)
	r.forgetShards(t0)
	r.forgetShards(t0.Add(forgetShardAfter))
	if s, ok := r.Stats().Shards[shard]; ok {
		t.Errorf("Stats.Shards[%s] %v after Recompute read it: %+v; want it forgotten", shard, forgetShardAfter, s)
	}
}

// readBlock reads 5 records from a new one-shard stream on kinesalite with
// a receiver of baseConfig, and returns that config and the first block it
// pushed, for a Recompute to read again.
func readBlock(t *testing.T) (Config, batch.BlockInfo) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	data := payloads("r", 5)
	cfg := baseConfig(env, stream)
	run := startReceiver(t, cfg, len(data))
	if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
		t.Fatal(err)
	}
	run.wait(t)
	run.stop(t)
	cfg.Client = env.Kinesis()
	return cfg, run.c.snapshot()[0].info
}
