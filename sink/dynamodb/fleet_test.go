package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/lineage"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// seqBase is a sequence number of 56 digits, as Kinesis's are today: more
// than a DynamoDB number holds.
const seqBase = "4959000000000000000000000000000000000000000000000000"

// seqOf returns the i-th sequence number after seqBase (i < 10000).
func seqOf(i int) string {
	s := strconv.Itoa(i)
	return seqBase + strings.Repeat("0", 4-len(s)) + s
}

// fromShard returns the batch at time t of recs[from:to], each with its
// origin: record i of shard "shardId-000000000000" of stream "src", at
// seqOf(i).
func fromShard(t batch.Time, recs []event, from, to int) *batch.Batch[event] {
	origins := make([]batch.Origin, 0, to-from)
	for i := from; i < to; i++ {
		origins = append(origins, batch.Origin{Stream: "src", Shard: "shardId-000000000000", Seq: seqOf(i)})
	}
	return batch.New(t, nil, recs[from:to]).WithOrigins(origins)
}

// TestLeaseMovedToWorkerWithEarlierBatchTimes writes, against dynalite, a
// shard's records as a fleet does when the shard's lease moves: worker A
// writes records 0-19 in its batch at 12:00:02, then worker B, which took
// the lease at A's last checkpoint (after record 14) and whose batch timer
// runs behind A's, writes records 15-39 in its batch at 12:00:01, and A, a
// zombie, runs its batch again. The table must be that of applying every
// record once, in shard order: B's writes are of later records, whatever
// its batch times, and A's replay changes nothing. Versions by batch time
// skipped B's writes as stale (a lost update per item).
func TestLeaseMovedToWorkerWithEarlierBatchTimes(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	recs := events(40, 6, true)
	a := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: 4})
	b := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: 4})
	const noon = 1_700_000_000_000
	ba := fromShard(noon+2000, recs, 0, 20)
	bb := fromShard(noon+1000, recs, 15, 40)
	for i, w := range []struct {
		s *dynamodb.Sink[event]
		b *batch.Batch[event]
	}{{a, ba}, {b, bb}, {a, ba}} {
		if err := w.s.Write(ctx, w.b); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if diff := cmp.Diff(apply(nil, recs...), scan(t, c, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if st := b.Stats(); st.Written != 20 || st.Skipped != 5 {
		t.Errorf("worker B: Stats %+v: want 20 written (records 20-39), 5 skipped (15-19, which A wrote)", st)
	}
	if st := a.Stats(); st.Written != 20 || st.Skipped != 20 {
		t.Errorf("worker A: Stats %+v: want 20 written, 20 skipped (its replay)", st)
	}
}

// sharingSource is a memory source that says, as a Kinesis receiver with
// leases does, whether other workers share its shards.
type sharingSource struct {
	*memory.Source[event]
	shares bool
}

func (s sharingSource) SharesShards() bool { return s.shares }

// runFleet runs, to its drained end, a pipeline whose source (sharing its
// shards if shares) holds recs, writing them with a Sink of cfg; it
// returns Run's error.
func runFleet(t *testing.T, cfg dynamodb.Config, shares bool, recs []event) error {
	t.Helper()
	s := newSink(t, t.Context(), cfg)
	return runSource(t, recs, func(src *memory.Source[event]) source.Receiver[event] {
		return sharingSource{Source: src, shares: shares}
	}, s.Write)
}

// runSource runs, to its drained end, a pipeline whose source is wrap of
// a memory source holding recs, giving each batch to f; it returns Run's
// error.
func runSource(t *testing.T, recs []event, wrap func(*memory.Source[event]) source.Receiver[event],
	f func(context.Context, *batch.Batch[event]) error) error {
	t.Helper()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	src, err := memory.New[event](memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Push(recs...); err != nil {
		t.Fatal(err)
	}
	stream.ForEachBatch(stream.From(p, wrap(src)), f, stream.Retry(0))
	if err := p.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	return p.Run(ctx)
}

// A batch without origins on a pipeline whose source shares its shards
// (a fleet) is refused, naming the fixes, and nothing is written; with
// AllowBatchTimeVersions, or on a source that shares nothing, it is written.
func TestFleetWithoutOriginsRefused(t *testing.T) {
	t.Parallel()
	c, table, _ := setup(t)
	recs := events(12, 4, true)
	err := runFleet(t, dynamodb.Config{Client: c, Table: table}, true, recs)
	if !errors.Is(err, dynamodb.ErrInvalidConfig) {
		t.Fatalf("Run: %v; want ErrInvalidConfig", err)
	}
	for _, want := range []string{"share", "stream.Origins()", "AllowBatchTimeVersions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run: %v\ndoes not say %q", err, want)
		}
	}
	if got := scan(t, c, table); len(got) != 0 {
		t.Errorf("refused batch wrote %v", got)
	}
	for _, tc := range []struct {
		name   string
		shares bool
		allow  bool
	}{{"allowed", true, true}, {"one worker", false, false}} {
		table := createTable(t, c)
		if err := runFleet(t, dynamodb.Config{Client: c, Table: table, AllowBatchTimeVersions: tc.allow}, tc.shares, recs); err != nil {
			t.Fatalf("%s: Run: %v", tc.name, err)
		}
		if diff := cmp.Diff(apply(nil, recs...), scan(t, c, table)); diff != "" {
			t.Errorf("%s: table (-want +got):\n%s", tc.name, diff)
		}
	}
}

// An item's version names the source shard of its last write: a write
// from another shard (the item's key moved to a child shard in a reshard,
// or a source not partitioned by the item's key) is applied whatever its
// position, a write of the same shard only if newer; and an item whose
// version is of the other kind (by batch time, or by origin: the pipeline
// changed) takes the write rather than stay frozen.
func TestOriginVersionsAcrossShardsAndKinds(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table})
	put := func(n int) event { return event{ID: "x", N: n, Put: true} }
	at := func(shard, seq string, e event) *batch.Batch[event] {
		return batch.New(1_700_000_000_000, nil, []event{e}).WithOrigins([]batch.Origin{{Stream: "src", Shard: shard, Seq: seq}})
	}
	steps := []struct {
		b    *batch.Batch[event]
		want string // n after the write
	}{
		{batch.New(1_700_000_005_000, nil, []event{put(1)}), "1"}, // by batch time
		{at("shardId-000000000000", "900", put(2)), "2"},          // by origin over a batch time
		{at("shardId-000000000000", "800", put(3)), "2"},          // older: skipped
		{at("shardId-000000000000", "1000", put(4)), "4"},         // newer (more digits)
		{at("shardId-000000000002", "5", put(5)), "5"},            // the child shard
		{at("shardId-000000000002", "5", put(6)), "5"},            // a replay
		{batch.New(1_700_000_000_000, nil, []event{put(7)}), "7"}, // by batch time over an origin
		{batch.New(1_700_000_000_000, nil, []event{put(8)}), "7"}, // a replay
		{at("shardId-000000000002", "4", put(9)), "9"},            // by origin over a batch time
	}
	for i, st := range steps {
		if err := s.Write(ctx, st.b); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := scan(t, c, table)["x"]["n"]; got != st.want {
			t.Fatalf("step %d: n = %s, want %s", i, got, st.want)
		}
	}
}

// TestParentWriteAfterChildSkipped writes, against dynalite, an item's
// records across a reshard as a fleet can: the parent shard's records are
// written (by the worker that finished the parent), then the child's, and
// then a zombie that lost the parent's lease while its batch was in
// flight, or a worker that replays its own batch of the parent after a
// restart, sends its writes of the parent's records again. A child's lease
// is taken only once its parents are at SHARD_END, which is marked only
// once every record of theirs is in a completed batch, so those late
// writes are replays: they must change nothing, neither bring back the
// parent's value of a put nor count an update twice. The child's writes,
// which carry its lease's parents, fence them off. A write of a shard that
// is no parent of the item's last (a source not partitioned by the item's
// key) is still applied.
func TestParentWriteAfterChildSkipped(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	const parent, other, child, unrelated = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"
	// The child merged the two parents, as its lease names them.
	ctx = lineage.With(ctx, func(stream string) map[string][]string {
		if stream == "src" {
			return map[string][]string{child: {parent, other}}
		}
		return nil
	})
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table})
	put := func(n int) event { return event{ID: "x", N: n, Put: true} }
	add := func(n int) event { return event{ID: "y", N: n} }
	at := func(shard, seq string, es ...event) *batch.Batch[event] {
		origins := make([]batch.Origin, len(es))
		for i := range es {
			origins[i] = batch.Origin{Stream: "src", Shard: shard, Seq: seq, Index: i}
		}
		return batch.New(1_700_000_000_000, nil, es).WithOrigins(origins)
	}
	steps := []struct {
		name string
		b    *batch.Batch[event]
		want map[string]map[string]string // the table after the write
	}{
		{"parent", at(parent, "10", put(1), add(1)), map[string]map[string]string{"x": {"n": "1"}, "y": {"hits": "1", "last": "1"}}},
		{"child", at(child, "5", put(2), add(2)), map[string]map[string]string{"x": {"n": "2"}, "y": {"hits": "2", "last": "2"}}},
		{"parent's replay", at(parent, "10", put(1), add(1)), map[string]map[string]string{"x": {"n": "2"}, "y": {"hits": "2", "last": "2"}}},
		{"other parent's", at(other, "7", put(3), add(3)), map[string]map[string]string{"x": {"n": "2"}, "y": {"hits": "2", "last": "2"}}},
		{"child's later", at(child, "6", put(4), add(4)), map[string]map[string]string{"x": {"n": "4"}, "y": {"hits": "3", "last": "4"}}},
		{"unrelated shard", at(unrelated, "1", put(5), add(5)), map[string]map[string]string{"x": {"n": "5"}, "y": {"hits": "4", "last": "5"}}},
	}
	for _, st := range steps {
		if err := s.Write(ctx, st.b); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if diff := cmp.Diff(st.want, scan(t, c, table)); diff != "" {
			t.Fatalf("after the %s write: table (-want +got):\n%s", st.name, diff)
		}
	}
	if st := s.Stats(); st.Written != 8 || st.Skipped != 4 {
		t.Errorf("Stats %+v: want 8 written, 4 skipped (the parents' late writes)", st)
	}
}

// TestReshardedParentReplaySkipped runs, on kinesalite and dynalite, a
// worker with leases over a stream whose shard was split after some
// records: it writes the parent's records, then, once the parent is at
// SHARD_END, the children's (the same items). Its batches of the parent
// are then written again, as a zombie that lost the parent's lease with
// those batches in flight, or a restart replaying them, would: they must
// change nothing, as the children's writes name their lease's parent.
// Without that, the parent's puts came back and its updates counted twice.
func TestReshardedParentReplaySkipped(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	env, in := oneShardStream(t)
	recs := events(60, 6, true)
	put := func(from, to int) { putEvents(t, env, in, recs[from:to]) }
	put(0, 30)
	kc := env.Kinesis()
	shards, err := kc.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(in)})
	if err != nil {
		t.Fatal(err)
	}
	parent := aws.ToString(shards.Shards[0].ShardId)
	splitShard(t, env, in, parent)
	put(30, 60)

	var fromParent []*batch.Batch[event]
	runWorker(t, env, c, in, table, "a", nil, len(recs), func(b *batch.Batch[event]) error {
		n := 0
		for _, o := range b.Origins() {
			if o.Shard == parent {
				n++
			}
		}
		switch n {
		case 0:
		case b.Len():
			fromParent = append(fromParent, b)
		default:
			return fmt.Errorf("a batch with %d records of the parent and %d of its children", n, b.Len()-n)
		}
		return nil
	})
	want := apply(nil, recs...)
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Fatalf("table (-want +got):\n%s", diff)
	}
	zombie := newSink(t, ctx, dynamodb.Config{Client: c, Table: table})
	n := 0
	for _, b := range fromParent {
		if err := zombie.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		n += b.Len()
	}
	if n != 30 {
		t.Fatalf("%d records written from the parent, want 30", n)
	}
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("after the parent's batches again: table (-want +got):\n%s", diff)
	}
	if st := zombie.Stats(); st.Written != 0 || st.Skipped != 30 {
		t.Errorf("parent's batches again: Stats %+v, want 30 skipped", st)
	}
}

// TestReshardedGrandparentReplaySkipped runs, on kinesalite and dynalite, a
// worker with leases over a stream whose one shard was split, and whose two
// children were merged again, records put before each reshard and after the
// merge: the worker writes the grandparent's records, the children's, then
// the merged shard's (the same items, the merged shard writing each last).
// Its batches of the grandparent are then written again, as a worker killed
// with those batches pending and restarted with its recovery log runs them:
// they must change nothing and be counted as skipped, as the merged shard's
// writes name its every ancestor, not only its lease's parents. Without
// that, the grandparent's puts came back and its updates counted twice.
func TestReshardedGrandparentReplaySkipped(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	env, in := oneShardStream(t)
	recs := events(90, 6, true)
	put := func(from, to int) { putEvents(t, env, in, recs[from:to]) }
	put(0, 30)
	shards, err := env.Kinesis().ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(in)})
	if err != nil {
		t.Fatal(err)
	}
	grandparent := aws.ToString(shards.Shards[0].ShardId)
	left, right := splitShard(t, env, in, grandparent)
	put(30, 60)
	merged := mergeShards(t, env, in, left, right)
	put(60, 90)

	var fromGrandparent []*batch.Batch[event]
	runWorker(t, env, c, in, table, "a", nil, len(recs), func(b *batch.Batch[event]) error {
		n := 0
		for _, o := range b.Origins() {
			if o.Shard == grandparent {
				n++
			}
		}
		switch n {
		case 0:
		case b.Len():
			fromGrandparent = append(fromGrandparent, b)
		default:
			return fmt.Errorf("a batch with %d records of the grandparent and %d of its descendants", n, b.Len()-n)
		}
		return nil
	})
	want := apply(nil, recs...)
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Fatalf("table (-want +got):\n%s", diff)
	}
	for id, v := range versions(t, c, table) {
		if !strings.HasPrefix(v, fmt.Sprintf("%d:%s%d:%s@", len(in), in, len(merged), merged)) {
			t.Fatalf("item %s: version %q, want one of the merged shard %s (it writes every item last)", id, v, merged)
		}
	}
	restarted := newSink(t, ctx, dynamodb.Config{Client: c, Table: table})
	n := 0
	for _, b := range fromGrandparent {
		if err := restarted.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		n += b.Len()
	}
	if n != 30 {
		t.Fatalf("%d records written from the grandparent, want 30", n)
	}
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("after the grandparent's batches again: table (-want +got):\n%s", diff)
	}
	if st := restarted.Stats(); st.Written != 0 || st.Skipped != 30 {
		t.Errorf("grandparent's batches again: Stats %+v, want 30 skipped", st)
	}
}

// splitShard splits shard of stream in at the middle of the hash key space
// (the shard must hold it) and returns its children, the lower hash keys'
// first, once the stream is ACTIVE again.
func splitShard(t *testing.T, env *localaws.Env, in, shard string) (left, right string) {
	t.Helper()
	if _, err := env.Kinesis().SplitShard(t.Context(), &awskinesis.SplitShardInput{StreamName: aws.String(in), ShardToSplit: aws.String(shard),
		NewStartingHashKey: aws.String(new(big.Int).Lsh(big.NewInt(1), 127).String())}); err != nil {
		t.Fatal(err)
	}
	var kids []kintypes.Shard
	for _, s := range awaitActive(t, env, in) {
		if aws.ToString(s.ParentShardId) == shard {
			kids = append(kids, s)
		}
	}
	if len(kids) != 2 {
		t.Fatalf("shard %s has %d children after its split, want 2", shard, len(kids))
	}
	lo, _ := new(big.Int).SetString(aws.ToString(kids[0].HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(kids[1].HashKeyRange.StartingHashKey), 10)
	if lo.Cmp(hi) > 0 {
		kids[0], kids[1] = kids[1], kids[0]
	}
	return aws.ToString(kids[0].ShardId), aws.ToString(kids[1].ShardId)
}

// mergeShards merges the adjacent shards a and b of stream in and returns
// their child, once the stream is ACTIVE again.
func mergeShards(t *testing.T, env *localaws.Env, in, a, b string) string {
	t.Helper()
	if _, err := env.Kinesis().MergeShards(t.Context(), &awskinesis.MergeShardsInput{StreamName: aws.String(in),
		ShardToMerge: aws.String(a), AdjacentShardToMerge: aws.String(b)}); err != nil {
		t.Fatal(err)
	}
	for _, s := range awaitActive(t, env, in) {
		if aws.ToString(s.ParentShardId) == a && aws.ToString(s.AdjacentParentShardId) == b {
			return aws.ToString(s.ShardId)
		}
	}
	t.Fatalf("no shard lists %s and %s as its parents after their merge", a, b)
	return ""
}

// awaitActive waits until stream in is ACTIVE after a reshard, and returns
// its shards.
func awaitActive(t *testing.T, env *localaws.Env, in string) []kintypes.Shard {
	t.Helper()
	kc := env.Kinesis()
	for {
		// kinesalite updates the stream at once; nothing to wait on but
		// asking again (the test's context bounds the loop).
		out, err := kc.DescribeStreamSummary(t.Context(), &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(in)})
		if err != nil {
			t.Fatal(err)
		}
		if out.StreamDescriptionSummary.StreamStatus == kintypes.StreamStatusActive {
			break
		}
	}
	shards, err := kc.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(in)})
	if err != nil {
		t.Fatal(err)
	}
	return shards.Shards
}

// countingLeases is a memory source that holds leases as a Kinesis
// receiver with leases does, and counts the calls of ShardAncestors (each
// of which walks every lease the worker holds).
type countingLeases struct {
	*memory.Source[event]
	leases []leasetable.Lease
	calls  *atomic.Int64
}

// ShardAncestors counts the call, and names the parents of the shards of
// "src" it holds, as their ancestors.
func (s countingLeases) ShardAncestors(stream string) map[string][]string {
	s.calls.Add(1)
	if stream != "src" {
		return nil
	}
	out := map[string][]string{}
	for _, l := range s.leases {
		if len(l.Parents) > 0 {
			out[l.Shard] = l.Parents
		}
	}
	return out
}

// A batch with records of many shards looks its shards' parents up in the
// held leases once, not once per shard: a worker holding hundreds of
// leases copied them all for each shard of each batch (75 ms and 86 MB a
// batch at 500 leases, BenchmarkBatchLineage in internal/lease). Each write still
// names its shard's parent.
func TestLineageLookedUpOncePerBatch(t *testing.T) {
	t.Parallel()
	c, table, _ := setup(t)
	const n = 20
	var leases []leasetable.Lease
	var recs []event
	var origins []batch.Origin
	for i := range n {
		child := fmt.Sprintf("shardId-%012d", n+i)
		leases = append(leases, leasetable.Lease{Shard: child, Parents: []string{fmt.Sprintf("shardId-%012d", i)}})
		recs = append(recs, event{ID: "item-" + strconv.Itoa(i), N: i, Put: true})
		origins = append(origins, batch.Origin{Stream: "src", Shard: child, Seq: "1"})
	}
	s := newSink(t, t.Context(), dynamodb.Config{Client: c, Table: table})
	var calls atomic.Int64
	err := runSource(t, []event{{ID: "trigger"}}, func(src *memory.Source[event]) source.Receiver[event] {
		return countingLeases{Source: src, leases: leases, calls: &calls}
	}, func(ctx context.Context, b *batch.Batch[event]) error {
		if b.Len() == 0 {
			return nil
		}
		before := calls.Load()
		if err := s.Write(ctx, batch.New(b.Time(), nil, recs).WithOrigins(origins)); err != nil {
			return err
		}
		if got := calls.Load() - before; got != 1 {
			return fmt.Errorf("a batch of records of %d shards read the held leases %d times, want 1", n, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	vs := versions(t, c, table)
	for i := range n {
		id, parent := "item-"+strconv.Itoa(i), fmt.Sprintf("<3:src20:shardId-%012d@", i)
		if !strings.HasSuffix(vs[id], parent) {
			t.Errorf("item %s: version %q does not end with its shard's parent %q", id, vs[id], parent)
		}
	}
}

// runWorker runs worker name (its clock clk, nil for the wall clock) of a
// fleet reading stream in with leases, through a Map, until it has written
// total records to table with stream.Origins, each batch checked to have
// its origins, then given to written if not nil (an error fails the run).
// It returns its sink's Stats.
func runWorker(t *testing.T, env *localaws.Env, c *ddb.Client, in, table, name string, clk clock.Clock, total int,
	written func(*batch.Batch[event]) error) dynamodb.Stats {
	t.Helper()
	awsCfg := env.AWSConfig()
	recv, err := kinesis.New(kinesis.Config{Stream: in, App: in, InitialPosition: kinesis.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 10 * time.Millisecond, ShardSyncInterval: 50 * time.Millisecond,
		Leases: &leasetable.Config{Endpoint: env.DynamoDBEndpoint, WorkerID: name, StateDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 50 * time.Millisecond, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s := newSink(t, t.Context(), dynamodb.Config{Client: c, Table: table})
	seen := 0
	stream.ForEachBatch(stream.Map(stream.From(p, recv), parseEvent), func(ctx context.Context, b *batch.Batch[event]) error {
		if err := s.Write(ctx, b); err != nil {
			return err
		}
		if len(b.Origins()) != b.Len() {
			return fmt.Errorf("batch of %d records with %d origins", b.Len(), len(b.Origins()))
		}
		if written != nil {
			if err := written(b); err != nil {
				return err
			}
		}
		if seen += b.Len(); seen == total {
			return p.Drain(ctx)
		}
		return nil
	}, stream.Origins(), stream.Retry(0))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("worker %s: %v", name, err)
	}
	return s.Stats()
}

// oneShardStream returns the shared servers and the name of a new stream
// of one shard on their kinesalite.
func oneShardStream(t *testing.T) (*localaws.Env, string) {
	t.Helper()
	env := servers.Env(t)
	in := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), in, 1); err != nil {
		t.Fatal(err)
	}
	return env, in
}

// putEvents puts recs on stream in, each as a record of partition key its
// item's ID that parseEvent reads back.
func putEvents(t *testing.T, env *localaws.Env, in string, recs []event) {
	t.Helper()
	data := make([][]byte, 0, len(recs))
	for _, e := range recs {
		data = append(data, fmt.Appendf(nil, "%s/%d/%v", e.ID, e.N, e.Put))
	}
	if err := env.PutRecords(t.Context(), in, data, func(i int) string { return recs[i].ID }); err != nil {
		t.Fatal(err)
	}
}

// parseEvent is the event a record putEvents put holds.
func parseEvent(r kinesis.Record) event {
	var e event
	parts := strings.Split(string(r.Data), "/")
	e.ID = parts[0]
	e.N, _ = strconv.Atoi(parts[1])
	e.Put = parts[2] == "true"
	return e
}

// A batch whose origins put a record of a shard after a later one of the
// shard writing the same item (a write of another shard between them or
// not) fails, naming the record, rather than write the item backwards.
func TestOriginsOutOfOrderRefused(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table})
	b := batch.New(1_700_000_000_000, nil, []event{{ID: "x", N: 1}, {ID: "x", N: 2}, {ID: "x", N: 3}}).WithOrigins([]batch.Origin{
		{Stream: "src", Shard: "shardId-000000000000", Seq: "20"},
		{Stream: "src", Shard: "shardId-000000000001", Seq: "5"},
		{Stream: "src", Shard: "shardId-000000000000", Seq: "19"}})
	err := s.Write(ctx, b)
	if err == nil || !strings.Contains(err.Error(), "record 2") || !strings.Contains(err.Error(), "comes after a later record") {
		t.Fatalf("Write: %v; want an error naming record 2", err)
	}
	if got := scan(t, c, table); len(got) != 0 {
		t.Errorf("refused batch wrote %v", got)
	}
}

// behind is the wall clock an hour behind: a worker whose batch times run
// behind another's.
type behind struct{ clock.Real }

func (behind) Now() time.Time { return time.Now().Add(-time.Hour) }

// TestPipelinesWithOrigins runs, on kinesalite and dynalite, two workers
// of a fleet sharing a stream by leases, one after the other, as when a
// shard's lease moves: worker A writes the shard's first records to the
// table and drains (its checkpoint after them, its lease handed back);
// then worker B, whose clock is an hour behind A's, takes the lease and
// writes the shard's next records. Each writes with stream.Origins, through
// a Map, and is accepted on its leased source: the table must hold every
// record applied once, in shard order. With versions by batch time, B's
// writes were skipped as stale.
func TestPipelinesWithOrigins(t *testing.T) {
	t.Parallel()
	c, table, _ := setup(t)
	env, in := oneShardStream(t)
	recs := events(60, 5, true)
	put := func(from, to int) { putEvents(t, env, in, recs[from:to]) }
	run := func(name string, clk clock.Clock, total int) dynamodb.Stats {
		return runWorker(t, env, c, in, table, name, clk, total, nil)
	}
	put(0, 30)
	if st := run("a", nil, 30); st.Written != 30 {
		t.Errorf("worker a: Stats %+v, want 30 written", st)
	}
	put(30, 60)
	if st := run("b", behind{}, 30); st.Written != 30 {
		t.Errorf("worker b: Stats %+v, want 30 written (the records after a's checkpoint)", st)
	}
	if diff := cmp.Diff(apply(nil, recs...), scan(t, c, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
