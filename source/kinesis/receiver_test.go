package kinesis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/kpl"
	"github.com/weirstream/weir/source"
)

func TestReceiveEveryRecordOnceAndRecompute(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	stream := newStream(t, env, 4)
	data := payloads("r", 4000)
	if err := env.PutRecords(t.Context(), stream, data[:2000], nil); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(env, stream)
	cfg.RecordsPerRead = 150 // several ranges per shard and per block
	run := startReceiver(t, cfg, len(data))
	if err := env.PutRecords(t.Context(), stream, data[2000:], nil); err != nil {
		t.Fatal(err)
	}
	run.wait(t)
	run.stop(t)

	got := run.c.records()
	checkExactlyOnce(t, data, got)
	checkShardOrder(t, got)
	blocks := run.c.snapshot()
	checkRanges(t, stream, blocks)
	checkRecompute(t, run.r, blocks)

	stats := run.r.Stats()
	if stats.RecordsRead != int64(len(data)) || stats.RangesRecomputed == 0 || len(stats.Shards) != 4 {
		t.Errorf("stats: %+v", stats)
	}
	for id := range stats.Shards {
		last := ""
		for _, r := range got {
			if r.ShardID == id {
				last = r.SequenceNumber
			}
		}
		if seq, ok := run.r.progress.latestStored(id); !ok || seq != last {
			t.Errorf("shard %s: latest stored %q, %v, want %q", id, seq, ok, last)
		}
	}
}

// TestListShardsFollowsNextToken reads a stream whose shard listing comes
// one shard per page: every shard must be found by following NextToken, and
// every record delivered.
func TestListShardsFollowsNextToken(t *testing.T) {
	env := servers.Env(t)
	const shards = 4
	stream := newStream(t, env, shards)
	data := payloads("p", 400)
	if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
		t.Fatal(err)
	}
	paged := newPagedListing()
	cfg := baseConfig(env, stream)
	cfg.Client = &hookClient{Client: env.Kinesis(), listShards: paged.listShards}
	run := startReceiver(t, cfg, len(data))
	run.wait(t)
	run.stop(t)

	got := run.c.records()
	checkExactlyOnce(t, data, got)
	checkShardOrder(t, got)
	if n := len(run.r.Stats().Shards); n != shards {
		t.Errorf("%d shards read, want %d", n, shards)
	}
	if n := paged.tokensFollowed(); n < shards-1 {
		t.Errorf("%d ListShards calls followed a NextToken, want at least %d", n, shards-1)
	}
}

func TestReshardSplitAndMergeKeepParentsFirst(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	stream := newStream(t, env, 2)
	client := env.Kinesis()
	data := payloads("m", 1500)
	put := func(part [][]byte) {
		if err := env.PutRecords(t.Context(), stream, part, nil); err != nil {
			t.Fatal(err)
		}
	}
	put(data[:500])

	var mu sync.Mutex
	ends := map[string]string{}
	cfg := baseConfig(env, stream)
	cfg.RecordsPerRead = 100
	cfg.onShardEnd = func(_ context.Context, shard, last string) {
		mu.Lock()
		defer mu.Unlock()
		ends[shard] = last
	}
	run := startReceiver(t, cfg, len(data))

	parent := splitInHalf(t, client, stream)
	put(data[500:1000])

	var kids []types.Shard
	for _, s := range openShards(t, client, stream) {
		if aws.ToString(s.ParentShardId) == aws.ToString(parent.ShardId) {
			kids = append(kids, s)
		}
	}
	if len(kids) != 2 {
		t.Fatalf("split made %d children, want 2", len(kids))
	}
	if _, err := client.MergeShards(t.Context(), &awskinesis.MergeShardsInput{
		StreamName: aws.String(stream), ShardToMerge: kids[0].ShardId, AdjacentShardToMerge: kids[1].ShardId,
	}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, client, stream)
	put(data[1000:])

	run.wait(t)
	run.stop(t)
	got := run.c.records()
	checkExactlyOnce(t, data, got)
	checkShardOrder(t, got)
	blocks := run.c.snapshot()
	checkRanges(t, stream, blocks)
	checkLineage(t, t.Context(), client, stream, blocks)

	mu.Lock()
	defer mu.Unlock()
	for _, closed := range []string{aws.ToString(parent.ShardId), aws.ToString(kids[0].ShardId), aws.ToString(kids[1].ShardId)} {
		last, ok := ends[closed]
		stored, _ := run.r.progress.latestStored(closed)
		if !ok || last != stored {
			t.Errorf("onShardEnd for %s: %q, %v; want the latest stored %q", closed, last, ok, stored)
		}
		if !run.r.Stats().Shards[closed].Drained {
			t.Errorf("shard %s not drained", closed)
		}
	}
}

func TestKPLAggregatedRecords(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 2)
	var aggregates [][]byte
	var want []string
	for a := range 30 {
		var users []kpl.UserRecord
		for u := range a%7 + 1 {
			d := "agg-" + strconv.Itoa(a) + "-" + strconv.Itoa(u)
			users = append(users, kpl.UserRecord{PartitionKey: "k" + strconv.Itoa(u), ExplicitHashKey: strconv.Itoa(u * 1000), Data: []byte(d)})
			want = append(want, d)
		}
		aggregates = append(aggregates, kpl.Aggregate(users))
	}
	aggregates = append(aggregates, []byte("plain"))
	want = append(want, "plain")
	// The user records' explicit hash keys are in the lower shard's range,
	// and so is the MD5 of the aggregates' partition key: they land there,
	// as the KPL routes an aggregate.
	if err := env.PutRecords(t.Context(), stream, aggregates, func(int) string { return keyInLower }); err != nil {
		t.Fatal(err)
	}
	run := startReceiver(t, baseConfig(env, stream), len(want))
	run.wait(t)
	run.stop(t)

	got := run.c.records()
	wantData := make([][]byte, len(want))
	for i, w := range want {
		wantData[i] = []byte(w)
	}
	checkExactlyOnce(t, wantData, got)
	checkShardOrder(t, got)
	for _, r := range got {
		if string(r.Data) == "plain" {
			if r.Aggregated || r.SubSequenceNumber != 0 {
				t.Errorf("plain record: %+v", r)
			}
			continue
		}
		var a, u int
		if _, err := fmt.Sscanf(string(r.Data), "agg-%d-%d", &a, &u); err != nil || !r.Aggregated || r.SubSequenceNumber != int64(u) ||
			r.PartitionKey != "k"+strconv.Itoa(u) || r.ExplicitHashKey != strconv.Itoa(u*1000) {
			t.Errorf("user record %+v (parse %v)", r, err)
		}
	}
	blocks := run.c.snapshot()
	checkRanges(t, stream, blocks)
	checkRecompute(t, run.r, blocks)
}

// TestBrokenKPLAggregate puts an aggregate whose MD5 digest does not
// match: it is delivered unchanged, as one plain record, and counted.
func TestBrokenKPLAggregate(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	broken := kpl.Aggregate([]kpl.UserRecord{{PartitionKey: "k", Data: []byte("u0")}, {PartitionKey: "k", Data: []byte("u1")}})
	broken[len(broken)-1] ^= 0xff // the digest ends the data
	put := [][]byte{[]byte("before"), broken, []byte("after")}
	if err := env.PutRecords(t.Context(), stream, put, func(int) string { return "k" }); err != nil {
		t.Fatal(err)
	}
	run := startReceiver(t, baseConfig(env, stream), len(put))
	run.wait(t)
	run.stop(t)

	got := run.c.records()
	if len(got) != len(put) {
		t.Fatalf("got %d records, want %d", len(got), len(put))
	}
	for i, r := range got {
		if diff := cmp.Diff(put[i], r.Data); diff != "" || r.Aggregated || r.SubSequenceNumber != 0 || r.PartitionKey != "k" {
			t.Errorf("record %d: %+v, want the data put, whole and not aggregated (-want +got data):\n%s", i, r, diff)
		}
	}
	kinesisRecords, bad := run.r.stats.readCounts()
	if s := run.r.Stats(); bad != 1 || kinesisRecords != 3 || s.RecordsRead != 3 {
		t.Errorf("bad aggregates %d, Kinesis records read %d, RecordsRead %d; want 1, 3, 3", bad, kinesisRecords, s.RecordsRead)
	}
	blocks := run.c.snapshot()
	checkRanges(t, stream, blocks)
	checkRecompute(t, run.r, blocks)
}

func TestBadConfigAndMissingStreamFailBeforeAnythingStarts(t *testing.T) {
	env := servers.Env(t)
	t.Run("bad config", func(t *testing.T) {
		_, err := New(Config{Stream: "x y", RecordsPerRead: 20000})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New: %v, want ErrInvalidConfig", err)
		}
		for _, field := range []string{"Stream", "App", "RecordsPerRead"} {
			if !strings.Contains(err.Error(), field) {
				t.Errorf("error %q does not name %s", err, field)
			}
		}
	})
	t.Run("missing stream", func(t *testing.T) {
		r, err := New(baseConfig(env, "no-such-stream"))
		if err != nil {
			t.Fatal(err)
		}
		pushed := false
		err = r.Start(t.Context(), source.Runtime[Record]{Push: func(context.Context, source.Block[Record]) (batch.BlockInfo, error) {
			pushed = true
			return batch.BlockInfo{}, nil
		}})
		if !errors.Is(err, ErrStreamNotFound) || !strings.Contains(err.Error(), "no-such-stream") || pushed {
			t.Errorf("Start: %v (pushed %v), want ErrStreamNotFound naming the stream", err, pushed)
		}
		if n := strings.Count(err.Error(), "check Config.Stream"); n != 1 {
			t.Errorf("Start: %v: the fix is said %d times, want once", err, n)
		}
		if err := r.Start(t.Context(), source.Runtime[Record]{}); err == nil {
			t.Error("second Start: nil error")
		}
	})
	// No region and no endpoint: the error names the fix, for Kinesis and
	// for the lease table, rather than the SDK's "Missing Region" (no call
	// is sent either way: the SDK finds no endpoint to send it to).
	t.Run("no region", func(t *testing.T) {
		stream := newStream(t, env, 1)
		kinesisCfg := baseConfig(env, stream)
		kinesisCfg.AWS.Region, kinesisCfg.Endpoint = "", ""
		leasesCfg := baseConfig(env, stream)
		noRegion := env.AWSConfig()
		noRegion.Region = ""
		leasesCfg.App = "no-region"
		leasesCfg.Leases = &leasetable.Config{AWS: &noRegion}
		for name, cfg := range map[string]Config{"Kinesis": kinesisCfg, "the lease table": leasesCfg} {
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			err = r.Start(t.Context(), source.Runtime[Record]{Push: func(context.Context, source.Block[Record]) (batch.BlockInfo, error) {
				return batch.BlockInfo{}, nil
			}})
			if err == nil || !strings.Contains(err.Error(), "no AWS region for "+name+": set AWS_REGION") {
				t.Errorf("%s without a region: Start: %v, want the missing region and its fix", name, err)
			}
			_ = r.Stop(t.Context())
		}
	})
	// An endpoint nothing listens on: once the attempts run out, the error
	// names the fix, as the warnings did.
	t.Run("unreachable endpoint", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + l.Addr().String()
		l.Close()
		cfg := baseConfig(env, "events")
		cfg.Endpoint, cfg.MaxAttempts = closed, 3
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Start(t.Context(), source.Runtime[Record]{Push: func(context.Context, source.Block[Record]) (batch.BlockInfo, error) {
			return batch.BlockInfo{}, nil
		}})
		if want := "gave up after 3 attempts; fix: cannot connect to Kinesis at " + closed + ": check Config.Endpoint"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start: %v, want %q", err, want)
		}
	})
	// A given Client ignores Config.Endpoint: the error names the client's
	// own endpoint and where it is set, not Config.Endpoint.
	t.Run("unreachable endpoint of a given client", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + l.Addr().String()
		l.Close()
		cfg := baseConfig(env, "events")
		cfg.MaxAttempts = 3
		cfg.Client = awskinesis.NewFromConfig(*cfg.AWS, func(o *awskinesis.Options) {
			o.BaseEndpoint, o.Retryer = aws.String(closed), aws.NopRetryer{}
		})
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Start(t.Context(), source.Runtime[Record]{Push: func(context.Context, source.Block[Record]) (batch.BlockInfo, error) {
			return batch.BlockInfo{}, nil
		}})
		if want := "fix: cannot connect to Kinesis at " + closed + ": check the endpoint of Config.Client"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start: %v, want %q", err, want)
		}
	})
	t.Run("stop before start", func(t *testing.T) {
		r, err := New(baseConfig(env, "no-such-stream"))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(t.Context(), source.Runtime[Record]{}); err != nil {
			t.Errorf("Start after Stop: %v, want nil", err)
		}
	})
}

func TestAssignerAndLatest(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	stream := newStream(t, env, 2)
	data := payloads("c", 400)
	if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
		t.Fatal(err)
	}
	base := startReceiver(t, baseConfig(env, stream), len(data))
	base.wait(t)
	base.stop(t)
	all := base.c.records()
	byShard := map[string][]Record{}
	for _, r := range all {
		byShard[r.ShardID] = append(byShard[r.ShardID], r)
	}
	shardA := all[0].ShardID

	t.Run("assigner reads one shard", func(t *testing.T) {
		cfg := baseConfig(env, stream)
		started := make(chan *control, 1)
		cfg.assigner = assignerFunc(func(ctx context.Context, c *control) error {
			if err := c.startShard(shardA, position{Initial: TrimHorizon}, readerHooks{}); err != nil {
				return err
			}
			if err := c.startShard(shardA, position{}, readerHooks{}); !errors.Is(err, errShardRunning) {
				t.Errorf("second startShard: %v, want errShardRunning", err)
			}
			started <- c
			<-ctx.Done()
			return nil
		})
		run := startReceiver(t, cfg, len(byShard[shardA]))
		run.wait(t)
		c := <-started
		if err := c.stopShard(t.Context(), shardA); err != nil {
			t.Fatal(err)
		}
		if c.reading(shardA) {
			t.Error("shard still read after stopShard")
		}
		run.stop(t)
		if diff := cmp.Diff(byShard[shardA], run.c.records()); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
	})

	t.Run("latest skips old records", func(t *testing.T) {
		cfg := baseConfig(env, stream)
		cfg.InitialPosition = Latest
		iterators := make(chan struct{}, 16)
		cfg.Client = &hookClient{
			Client: env.Kinesis(),
			getShardIterator: func(ctx context.Context, in *awskinesis.GetShardIteratorInput, next Client) (*awskinesis.GetShardIteratorOutput, error) {
				out, err := next.GetShardIterator(ctx, in)
				iterators <- struct{}{}
				return out, err
			},
		}
		fresh := payloads("fresh", 50)
		run := startReceiver(t, cfg, len(fresh))
		for range 2 {
			<-iterators
		}
		if err := env.PutRecords(t.Context(), stream, fresh, nil); err != nil {
			t.Fatal(err)
		}
		run.wait(t)
		run.stop(t)
		checkExactlyOnce(t, fresh, run.c.records())
	})
}

func TestUnavailableRange(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	data := payloads("t", 60)
	if err := env.PutRecords(t.Context(), stream, data, nil); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(env, stream)
	cfg.RecordsPerRead = 20
	run := startReceiver(t, cfg, len(data))
	run.wait(t)
	run.stop(t)
	var ranges []batch.SeqRange
	for _, b := range run.c.snapshot() {
		ranges = append(ranges, b.info.Ranges...)
	}
	all := batch.BlockInfo{Ranges: ranges, Count: len(data)}
	trimmedBefore := ranges[1].First // the first range is "trimmed"

	trimming := &hookClient{Client: env.Kinesis(), getRecords: func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error) {
		out, err := next.GetRecords(ctx, in)
		if err != nil {
			return out, err
		}
		kept := out.Records[:0]
		for _, r := range out.Records {
			if batch.CompareSeq(aws.ToString(r.SequenceNumber), trimmedBefore) >= 0 {
				kept = append(kept, r)
			}
		}
		out.Records = kept
		return out, nil
	}}
	invalid := &hookClient{Client: env.Kinesis(), getShardIterator: func(ctx context.Context, in *awskinesis.GetShardIteratorInput, next Client) (*awskinesis.GetShardIteratorOutput, error) {
		if aws.ToString(in.StartingSequenceNumber) == ranges[0].First {
			return nil, &types.InvalidArgumentException{Message: aws.String("sequence number is trimmed")}
		}
		return next.GetShardIterator(ctx, in)
	}}
	tests := []struct {
		name   string
		client Client
		skip   bool
	}{
		{"first record later, fail", trimming, false},
		{"first record later, skip", trimming, true},
		{"invalid argument, fail", invalid, false},
		{"invalid argument, skip", invalid, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(env, stream)
			c.Client, c.SkipUnavailableRanges = tt.client, tt.skip
			r, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Recompute(t.Context(), all)
			if !tt.skip {
				var ue *RangeUnavailableError
				if !errors.As(err, &ue) || ue.Range != ranges[0] || ue.Range.Stream != stream {
					t.Fatalf("Recompute: %v, want a *RangeUnavailableError for %v", err, ranges[0])
				}
				return
			}
			var skipped *source.RangesSkippedError
			if !errors.As(err, &skipped) || !cmp.Equal(skipped.Ranges, []int{0}) || !errors.As(err, new(*RangeUnavailableError)) {
				t.Fatalf("Recompute: %v, want a *source.RangesSkippedError naming range 0, wrapping a *RangeUnavailableError", err)
			}
			if diff := cmp.Diff(run.c.records()[ranges[0].Count:], got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if s := r.Stats(); s.RangesSkipped != 1 || s.RangesRecomputed != int64(len(ranges)-1) {
				t.Errorf("stats: skipped %d, recomputed %d", s.RangesSkipped, s.RangesRecomputed)
			}
		})
	}
}

// TestStartInsideAKPLAggregate starts a reader at a KCL checkpoint inside
// an aggregate (position.AtSubSequence): the aggregate's user records up to
// the sub-sequence number are left out, the rest and everything after are
// delivered once, and Recompute gives the blocks back the same.
func TestStartInsideAKPLAggregate(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	agg := func(name string, n int) []byte {
		var users []kpl.UserRecord
		for u := range n {
			users = append(users, kpl.UserRecord{PartitionKey: "k", Data: []byte(name + "/" + strconv.Itoa(u))})
		}
		return kpl.Aggregate(users)
	}
	put := [][]byte{[]byte("p0"), agg("A", 5), []byte("p1"), agg("B", 3)}
	if err := env.PutRecords(t.Context(), stream, put, func(int) string { return "k" }); err != nil {
		t.Fatal(err)
	}
	base := startReceiver(t, baseConfig(env, stream), 10)
	base.wait(t)
	base.stop(t)
	all := base.c.records()
	at := all[1] // A/0
	if string(at.Data) != "A/0" {
		t.Fatalf("second record read %q, want A/0", at.Data)
	}

	tests := []struct {
		name string
		sub  int64
		want []string
	}{
		{"inside", 2, []string{"A/3", "A/4", "p1", "B/0", "B/1", "B/2"}},
		{"sub-sequence 0: the aggregate again", 0, []string{"A/0", "A/1", "A/2", "A/3", "A/4", "p1", "B/0", "B/1", "B/2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(env, stream)
			cfg.assigner = assignerFunc(func(ctx context.Context, c *control) error {
				if err := c.startShard(at.ShardID, position{At: at.SequenceNumber, AtSubSequence: tt.sub}, readerHooks{}); err != nil {
					return err
				}
				<-ctx.Done()
				return nil
			})
			run := startReceiver(t, cfg, len(tt.want))
			run.wait(t)
			run.stop(t)
			var got []string
			for _, r := range run.c.records() {
				got = append(got, string(r.Data))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			blocks := run.c.snapshot()
			checkRanges(t, stream, blocks)
			checkRecompute(t, run.r, blocks)
		})
	}
}
