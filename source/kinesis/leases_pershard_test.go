package kinesis_test

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// countFleet is a fleet whose workers count records per partition key
// with a state declared partitioned by it (stream.PartitionedBy): each key
// records the greatest count any worker wrote, which is exact only if the
// state moved whole from worker to worker and shard to shard.
type countFleet struct {
	*fleet
	keys, perRound, round int
	// checkpoint is the workers' checkpoint interval (and so of their
	// snapshots); default 100 ms.
	checkpoint time.Duration
	// lease is the workers' lease duration; default 2 s.
	lease time.Duration
	// logger is the logger of the workers started while it is set;
	// testLogger() if nil.
	logger *slog.Logger
	// count makes the count per key of a worker's records (its keys
	// declared PartitionedBy): UpdateStateByKey unless set.
	count func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]]
	// forget is how long the workers started while it is set keep a shard
	// they no longer read (kinesis.ForgetShardsAfter); 10 minutes if 0.
	forget time.Duration
	// pipeClock is the clock of the pipelines started while it is set (it
	// seals their blocks and cuts their batches); their receivers keep the
	// wall clock for their leases. The wall clock if nil.
	pipeClock clock.Clock
	// endCheck, if set, is told by the receivers of the workers started
	// while it is set each time they judge a shard read to its end
	// (kinesis.OnEndCheck).
	endCheck func(shard string, ready bool)

	mu        sync.Mutex
	best      map[string]int
	receivers map[string]*kinesis.Receiver // by worker ID
}

func newCountFleet(t *testing.T, shards int) *countFleet {
	return &countFleet{fleet: newFleet(t, shards), keys: 24, perRound: 3, best: map[string]int{}}
}

// worker starts a worker and returns its pipeline and Run's result.
func (f *countFleet) worker(id string) (*stream.Pipeline, chan error) {
	return f.workerWith(id, f.env.DynamoDB())
}

// workerWith starts a worker whose lease table client is db.
func (f *countFleet) workerWith(id string, db leasetable.DynamoDBAPI) (*stream.Pipeline, chan error) {
	t := f.t
	cfg := kinesis.Config{Stream: f.stream, App: "pershard", InitialPosition: kinesis.TrimHorizon,
		Client: f.env.Kinesis(), PollInterval: 20 * time.Millisecond, ShardSyncInterval: 300 * time.Millisecond, Logger: cmp.Or(f.logger, testLogger()),
		Leases: &leasetable.Config{TableName: f.table, DynamoDB: db, WorkerID: id,
			LeaseDuration: cmp.Or(f.lease, 2*time.Second), CheckpointInterval: cmp.Or(f.checkpoint, 100*time.Millisecond)}}
	if f.forget > 0 {
		kinesis.ForgetShardsAfter(&cfg, f.forget)
	}
	if f.pipeClock != nil {
		cfg.Clock = clock.Real{}
	}
	r, err := kinesis.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.endCheck != nil {
		kinesis.OnEndCheck(r, f.endCheck)
	}
	f.mu.Lock()
	if f.receivers == nil {
		f.receivers = map[string]*kinesis.Receiver{}
	}
	f.receivers[id] = r
	f.mu.Unlock()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, BlockInterval: 20 * time.Millisecond, Logger: testLogger(),
		Clock: f.pipeClock})
	if err != nil {
		t.Fatal(err)
	}
	pairs := stream.Map(stream.From(p, r), func(rec kinesis.Record) stream.Pair[string, int] {
		return stream.Pair[string, int]{Key: rec.PartitionKey, Value: 1}
	})
	keyed := stream.PartitionedBy(pairs, func(k string) string { return k })
	var counts *stream.Stream[stream.Pair[string, int]]
	if f.count != nil {
		counts = f.count(p, keyed)
	} else {
		counts = stream.UpdateStateByKey(keyed, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
	}
	stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
		f.mu.Lock()
		for kv := range b.All() {
			f.best[kv.Key] = max(f.best[kv.Key], kv.Value)
		}
		f.mu.Unlock()
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

// put puts one more round: perRound records of every key.
func (f *countFleet) put() {
	f.round++
	data := make([][]byte, f.keys*f.perRound)
	for i := range data {
		data[i] = []byte(strconv.Itoa(i))
	}
	if err := f.env.PutRecords(f.t.Context(), f.stream, data, func(i int) string { return "k" + strconv.Itoa(i%f.keys) }); err != nil {
		f.t.Fatal(err)
	}
}

// wrong returns the keys whose greatest count is not the rounds' records.
func (f *countFleet) wrong() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var bad []string
	for k := range f.keys {
		key := "k" + strconv.Itoa(k)
		if n := f.best[key]; n != f.perRound*f.round {
			bad = append(bad, key+"="+strconv.Itoa(n))
		}
	}
	return bad
}

// waitExact waits until every key's count is exact.
func (f *countFleet) waitExact(what string) {
	f.t.Helper()
	f.waitFor(what, func() bool { return len(f.wrong()) == 0 })
}

// drain drains p and checks Run's result.
func (f *countFleet) drain(name string, p *stream.Pipeline, done chan error) {
	f.t.Helper()
	if err := p.Drain(f.t.Context()); err != nil {
		f.t.Fatalf("%s: Drain: %v", name, err)
	}
	if err := <-done; err != nil {
		f.t.Fatalf("%s: Run: %v", name, err)
	}
	if bad := f.wrong(); len(bad) > 0 {
		f.t.Errorf("after %s: counts %v, want %d each", name, bad, f.perRound*f.round)
	}
}

// A keyed count declared partitioned by its key (stream.PartitionedBy)
// keeps its state per shard, and the state moves with the shard's lease:
// one worker counts the first records and drains, a second counts the
// next and is stopped at once (no drain: a crash for the lease table),
// and a third takes the leases once they expire and counts the rest.
// Every key's count, the greatest any worker wrote, is exact: a state
// split between workers would leave it short, a record counted twice long.
func TestLeasesStatePerShardMovesWithLease(t *testing.T) {
	t.Parallel()
	movesWithLease(t, newCountFleet(t, 4))
}

// A window's history moves with its shard's lease as a keyed state does:
// a ReduceByKeyAndWindow of an hour counts exactly across the same drain,
// crash and take-over.
func TestLeasesStatePerShardWindowMovesWithLease(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 4)
	f.count = func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
		return stream.ReduceByKeyAndWindow(pairs, func(a, b int) int { return a + b }, nil, time.Hour, p.BatchInterval())
	}
	movesWithLease(t, f)
}

// movesWithLease runs f's workers through a drain, a crash and a
// take-over, checking every key's count after each.
func movesWithLease(t *testing.T, f *countFleet) {

	// a counts round 1 and drains: snapshots stored, then the last
	// checkpoints, then the leases handed back.
	f.put()
	a, aDone := f.worker("a")
	f.waitExact("a counts round 1")
	f.drain("a", a, aDone)

	// b takes every lease, loads the states and counts round 2 on top of
	// them; then it stops at once, without a drain.
	b, bDone := f.worker("b")
	f.put()
	f.waitExact("b counts rounds 1-2")
	b.Stop()
	<-bDone

	// c takes the leases once they expire, loads what b stored (the
	// checkpoints stop at it) and counts round 3 on top.
	f.put()
	c, cDone := f.worker("c")
	f.waitExact("c counts rounds 1-3")
	f.drain("c", c, cDone)
}

// A split passes the parent's state on: the children of a shard split
// while a worker counts start from their parent's last state, each with
// the keys of its half, and a worker that takes them over later goes on
// from theirs.
func TestLeasesStatePerShardAcrossSplit(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 1)
	f.put()
	a, aDone := f.worker("a")
	f.waitExact("a counts round 1 on the parent")
	f.split()
	f.put()
	f.waitExact("a counts round 2 on the children")
	f.drain("a", a, aDone)

	f.put()
	b, bDone := f.worker("b")
	f.waitExact("b counts round 3 on the children")
	f.drain("b", b, bDone)
}

// BenchmarkLeaseTakeWithState is the time a worker takes to read on from a
// shard whose lease it takes with a state snapshot of WEIR_SHARDSTATE_MB
// megabytes (default 1; the figure is 100): worker a builds the
// state (1000 keys of a kinesalite shard, each holding MB/1000 of bytes),
// drains (storing the snapshot: "store-s"), then worker b starts, takes the
// lease, loads the snapshot and reads a record put after the drain:
// "take-s" is from b's start, its lease table scan included, to that
// record's batch at its output, with default lease settings.
//
//	WEIR_SHARDSTATE_MB=100 go test -run x -bench LeaseTakeWithState -benchtime 1x ./source/kinesis/
func BenchmarkLeaseTakeWithState(b *testing.B) {
	mb := 1
	if s, err := strconv.Atoi(os.Getenv("WEIR_SHARDSTATE_MB")); err == nil && s > 0 {
		mb = s
	}
	const keys = 1000
	per := mb << 20 / keys
	for b.Loop() {
		f := newFleet(b, 1)
		worker := func(id string, marker chan<- struct{}) (*stream.Pipeline, chan error) {
			r, err := kinesis.New(kinesis.Config{Stream: f.stream, App: "take", InitialPosition: kinesis.TrimHorizon,
				Client: f.env.Kinesis(), Logger: testLogger(),
				Leases: &leasetable.Config{TableName: f.table, DynamoDB: f.env.DynamoDB(), WorkerID: id}})
			if err != nil {
				b.Fatal(err)
			}
			p, err := stream.NewPipeline(stream.Config{Logger: testLogger()})
			if err != nil {
				b.Fatal(err)
			}
			pairs := stream.Map(stream.From(p, r), func(rec kinesis.Record) stream.Pair[string, int] {
				return stream.Pair[string, int]{Key: rec.PartitionKey, Value: 1}
			})
			state := stream.UpdateStateByKey(stream.PartitionedBy(pairs, func(k string) string { return k }),
				func(k string, vs []int, s []byte, ok bool) ([]byte, bool) {
					if !ok {
						s = make([]byte, per)
					}
					return s, true
				})
			stream.ForEachBatch(state, func(_ context.Context, bt *batch.Batch[stream.Pair[string, []byte]]) error {
				n := 0
				for kv := range bt.All() {
					n++
					if kv.Key == "marker" && marker != nil {
						marker <- struct{}{}
						marker = nil
					}
				}
				if n >= keys {
					select {
					case f.tick <- struct{}{}:
					default:
					}
				}
				return nil
			})
			done := make(chan error, 1)
			go func() { done <- p.Run(context.WithoutCancel(b.Context())) }()
			return p, done
		}
		data := make([][]byte, keys)
		for i := range data {
			data[i] = []byte("k" + strconv.Itoa(i))
		}
		if err := f.env.PutRecords(b.Context(), f.stream, data, func(i int) string { return "k" + strconv.Itoa(i) }); err != nil {
			b.Fatal(err)
		}
		a, aDone := worker("a", nil)
		<-f.tick // every key has its state
		start := time.Now()
		if err := a.Drain(b.Context()); err != nil {
			b.Fatal(err)
		}
		if err := <-aDone; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "store-s")
		if err := f.env.PutRecords(b.Context(), f.stream, [][]byte{[]byte("marker")}, func(int) string { return "marker" }); err != nil {
			b.Fatal(err)
		}
		marker := make(chan struct{})
		start = time.Now()
		w, wDone := worker("b", marker)
		<-marker
		b.ReportMetric(time.Since(start).Seconds(), "take-s")
		if err := w.Drain(b.Context()); err != nil {
			b.Fatal(err)
		}
		if err := <-wDone; err != nil {
			b.Fatal(err)
		}
	}
}

// A merge passes both parents' states on: the child of two shards merged
// while a worker counts starts with the keys of both.
func TestLeasesStatePerShardAcrossMerge(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 2)
	f.put()
	a, aDone := f.worker("a")
	f.waitExact("a counts round 1 on the parents")
	shards := f.shards()
	if len(shards) != 2 {
		t.Fatalf("%d shards, want 2", len(shards))
	}
	ctx := t.Context()
	c := f.env.Kinesis()
	if _, err := c.MergeShards(ctx, &awskinesis.MergeShardsInput{StreamName: aws.String(f.stream),
		ShardToMerge: shards[0].ShardId, AdjacentShardToMerge: shards[1].ShardId}); err != nil {
		t.Fatal(err)
	}
	f.awaitActive()
	f.put()
	f.waitExact("a counts round 2 on the merged child")
	f.drain("a", a, aDone)
}

// A state that fails to load when its lease is taken (DynamoDB answering
// 500 past the SDK's retries) is loaded again, the shard not read
// meanwhile: no record is counted without its shard's state.
func TestLeasesStatePerShardLoadRetried(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 2)
	f.put()
	a, aDone := f.worker("a")
	f.waitExact("a counts round 1")
	f.drain("a", a, aDone)

	tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "GetItem", Kind: faults.InternalFailure, Times: 12}}})
	if err != nil {
		t.Fatal(err)
	}
	awsCfg := f.env.AWSConfig()
	awsCfg.HTTPClient = tr
	db := awsdynamodb.NewFromConfig(awsCfg, func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(f.env.DynamoDBEndpoint) })
	b, bDone := f.workerWith("b", db)
	f.put()
	f.waitExact("b counts round 2 on the states it loaded")
	f.drain("b", b, bDone)
	if n := tr.Injected("GetItem", 0); n != 12 {
		t.Errorf("%d faults injected into GetItem, want 12", n)
	}
}

// A child that reads no record before it is split again passes on the
// state it loaded from its parent: the grandchildren find its snapshot
// (stored at its end even though its state did not move).
func TestLeasesStatePerShardAcrossTwoSplits(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 1)
	f.put()
	a, aDone := f.worker("a")
	f.waitExact("a counts round 1 on the parent")
	parent := f.split()
	var child string
	for _, s := range f.shards() {
		if aws.ToString(s.ParentShardId) == parent {
			child = aws.ToString(s.ShardId)
			break
		}
	}
	splitShard(t, f.fleet, child)
	f.put()
	f.waitExact("a counts round 2 on the grandchildren and the other child")
	f.drain("a", a, aDone)
}

// splitShard splits shard at the middle of its hash key range and waits
// until the stream is active again.
func splitShard(t *testing.T, f *fleet, shard string) {
	t.Helper()
	ctx := t.Context()
	c := f.env.Kinesis()
	var lo, hi *big.Int
	for _, s := range f.shards() {
		if aws.ToString(s.ShardId) == shard {
			lo, _ = new(big.Int).SetString(*s.HashKeyRange.StartingHashKey, 10)
			hi, _ = new(big.Int).SetString(*s.HashKeyRange.EndingHashKey, 10)
		}
	}
	if lo == nil {
		t.Fatalf("no shard %s", shard)
	}
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := c.SplitShard(ctx, &awskinesis.SplitShardInput{StreamName: aws.String(f.stream),
		ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(mid.String())}); err != nil {
		t.Fatal(err)
	}
	f.awaitActive()
}

// A worker that loses its leases without a hand-over (here: another owner
// written into the table, which never renews them) and takes them back
// once they expire reads each shard again from its last snapshot (none
// here: no checkpoint interval passed), not after what it read before:
// the state of the earlier hold was dropped with the loss.
func TestLeasesStatePerShardRetakenBySameWorker(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 2)
	f.checkpoint = time.Hour
	f.put()
	a, aDone := f.worker("a")
	f.waitExact("a counts round 1")
	ctx := t.Context()
	ghosted := map[string]int64{}
	for shard, l := range f.leases() {
		ghosted[shard] = l.Counter + 1000
		if _, err := f.env.DynamoDB().UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
			TableName:        aws.String(f.table),
			Key:              map[string]ddbtypes.AttributeValue{"leaseKey": &ddbtypes.AttributeValueMemberS{Value: shard}},
			UpdateExpression: aws.String("SET leaseOwner = :ghost, leaseCounter = :c"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":ghost": &ddbtypes.AttributeValueMemberS{Value: "ghost"},
				":c":     &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(l.Counter+1000, 10)},
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	f.waitFor("a takes its leases back", func() bool {
		for shard, l := range f.leases() {
			if l.Owner != "a" || l.Counter <= ghosted[shard] {
				return false
			}
		}
		return true
	})
	f.put()
	f.waitExact("a counts rounds 1-2 after taking its leases back")
	f.drain("a", a, aDone)
}

// A shard stolen towards balance is handed off with its state: a worker
// joins one that counts four shards (snapshots a minute apart, so the
// hand-off's own snapshot is the only one), asks for two of them while
// records keep coming, and the holder stores each one's snapshot before
// its last checkpoint and hands it off. Every key's count is exact after.
func TestLeasesStatePerShardHandedOff(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 4)
	f.checkpoint = time.Minute
	f.put()
	a, aDone := f.worker("a")
	f.waitExact("a counts round 1")
	b, bDone := f.worker("b")
	f.put() // while b asks for two shards and a hands them off
	f.waitFor("b holds two leases", func() bool { return f.holding("b") == 2 })
	f.put()
	f.waitExact("a and b count rounds 1-3")
	f.drain("b", b, bDone)
	f.drain("a", a, aDone)
}

// stateGetFault is a lease table client whose reads of the shard state
// table fail until the test lets them through (let), as a state load that
// fails and waits to be tried again does; it counts the reads of the state
// of the shard let through with them.
type stateGetFault struct {
	*awsdynamodb.Client
	state string

	mu    sync.Mutex
	open  bool
	shard string
	loads int // reads of shard's state since let
}

func (c *stateGetFault) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	if aws.ToString(in.TableName) == c.state {
		c.mu.Lock()
		open := c.open
		if k, ok := in.Key["log"].(*ddbtypes.AttributeValueMemberS); ok && open && strings.Contains(k.Value, c.shard) {
			c.loads++
		}
		c.mu.Unlock()
		if !open {
			return nil, errors.New("stateGetFault: injected state read failure")
		}
	}
	return c.Client.GetItem(ctx, in, opts...)
}

// let lets the state reads through from now on, and counts those of
// shard's state.
func (c *stateGetFault) let(shard string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open, c.shard = true, shard
}

// loaded returns the reads of the state of the shard let through.
func (c *stateGetFault) loaded() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads
}

// A lease asked for (a steal towards balance) while its holder has not
// loaded its state yet (the load failed and waits to be tried again) is
// handed off at once: the holder read nothing of it. Before, the holder
// ignored the request, loaded the state later, claiming it under the
// lease as asked for, and started a reader that delivered nothing (the
// lease being handed off) until the lease expired on its clock: the shard
// went unread for a lease duration.
func TestLeasesStatePerShardHandOffBeforeLoad(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 2)
	f.put()
	db := &stateGetFault{Client: f.env.DynamoDB(), state: f.table + "-state"}
	a, aDone := f.workerWith("a", db)
	f.waitFor("a holds both leases", func() bool { return f.holding("a") == 2 })
	b, bDone := f.worker("b")
	asked := f.awaitAsk("b", "a")
	ra := f.receiver("a")
	f.waitFor("a hands the lease asked for off", func() bool { return ra.Stats().Shards[asked].HandedBack > 0 })
	db.let(asked)
	f.waitExact("a and b count round 1")
	f.put()
	f.waitExact("a and b count rounds 1-2")
	// Counted before the drains: once b drained, a may take the lease.
	if n := db.loaded(); n != 0 {
		t.Errorf("a loaded the state of %s %d times after it handed it off, want none: it hands it off unread", asked, n)
	}
	f.drain("b", b, bDone)
	f.drain("a", a, aDone)
}

// A shard whose lease its holder handed off before it read it (its state
// not loaded yet when another worker asked for it) is forgotten as a shard
// read is: its entry in the holder's Stats().Shards, zero counters and its
// count of leases handed back, goes once the holder has not read it for
// the time shards are kept (kinesis.ForgetShardsAfter; 10 minutes by
// default). Before, the entry stayed for good, and with it the shard's
// metric series: on a long-lived fleet whose leases move and whose stream
// is resharded, one more for every such shard.
func TestLeasesStatePerShardForgetsShardHandedOffUnread(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 2)
	f.forget = 200 * time.Millisecond
	f.put()
	db := &stateGetFault{Client: f.env.DynamoDB(), state: f.table + "-state"}
	a, aDone := f.workerWith("a", db)
	f.waitFor("a holds both leases", func() bool { return f.holding("a") == 2 })
	b, bDone := f.worker("b")
	asked := f.awaitAsk("b", "a")
	// The lease b's, not under a hand-off: a let it go, unread (its state
	// reads fail until then).
	f.waitFor("a lets the lease asked for go", func() bool {
		l := f.leases()[asked]
		return l.Owner == "b" && l.CheckpointOwner == ""
	})
	db.let(asked)
	f.waitExact("a and b count round 1")
	ra := f.receiver("a")
	f.waitFor("a forgets the shard it handed off unread", func() bool {
		_, ok := ra.Stats().Shards[asked]
		return !ok
	})
	f.drain("b", b, bDone)
	f.drain("a", a, aDone)
}

// awaitAsk waits until asker asks holder for a lease, and returns its
// shard. Every lease must be holder's when asker starts: a lease naming
// asker its owner is one it asked for, whether holder has handed it off
// already or not. (The ask itself, asker the owner and holder the
// checkpoint owner, lasts only until the hand-off, which is at once for a
// shard holder does not read: a wait for it on a slow machine missed it.)
func (f *countFleet) awaitAsk(asker, holder string) string {
	f.t.Helper()
	asked := ""
	f.waitFor(asker+" asks "+holder+" for a lease", func() bool {
		for shard, l := range f.leases() {
			if l.Owner == asker && (l.CheckpointOwner == holder || l.CheckpointOwner == "") {
				asked = shard
				return true
			}
		}
		return false
	})
	return asked
}

// receiver returns the receiver of worker id.
func (f *countFleet) receiver(id string) *kinesis.Receiver {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.receivers[id]
}

// holding returns how many leases the table names worker's, not under a
// hand-off; none while the table does not exist yet.
func (f *countFleet) holding(worker string) int {
	ls, err := f.tryLeases()
	if err != nil {
		return 0 // the table is not there yet
	}
	n := 0
	for _, l := range ls {
		if l.Owner == worker && l.CheckpointOwner == "" {
			n++
		}
	}
	return n
}

// A drain stores the state as it is, not only when it read records since
// its last snapshot: keys a MapWithState timed out after that snapshot
// (no record moved the shard's position) are gone from the state the next
// owner loads. Before, the drain stored nothing, and the next worker loaded
// the keys back: it timed them out a second time, or counted new records
// on top of a state its function had already closed. The same save serves
// a hand-off and a shard's end.
func TestLeasesStatePerShardDrainStoresTimeouts(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 2)
	// What the function saw, by key, in order: a record's count, or 0
	// for a timeout.
	var mu sync.Mutex
	events := map[string][]int{}
	f.count = func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
		mapped, _ := stream.MapWithState(pairs, func(k string, v int, st *stream.State[int]) (stream.Pair[string, int], bool) {
			mu.Lock()
			defer mu.Unlock()
			if st.IsTimingOut() {
				events[k] = append(events[k], 0)
				return stream.Pair[string, int]{}, false
			}
			st.Update(st.Get() + v)
			events[k] = append(events[k], st.Get())
			return stream.Pair[string, int]{Key: k, Value: st.Get()}, true
		}, stream.StateTimeout(time.Second)) // 10 snapshots of 100 ms before it
		return mapped
	}
	seen := func(n int) bool {
		mu.Lock()
		defer mu.Unlock()
		for k := range f.keys {
			if len(events["k"+strconv.Itoa(k)]) < n {
				return false
			}
		}
		return true
	}

	// a counts round 1, times every key out, and drains.
	f.put()
	a, aDone := f.worker("a")
	f.waitFor("a counts round 1 and times every key out", func() bool { return seen(f.perRound + 1) })
	f.drain("a", a, aDone)

	// b counts round 2 from the state a left: none.
	b, bDone := f.worker("b")
	f.waitFor("b holds both leases", func() bool { return f.holding("b") == 2 })
	f.put()
	f.waitFor("b counts round 2", func() bool { return seen(2*f.perRound + 1) })
	b.Stop()
	<-bDone

	mu.Lock()
	defer mu.Unlock()
	want := []int{1, 2, 3, 0, 1, 2, 3}
	for k := range f.keys {
		key := "k" + strconv.Itoa(k)
		if got := events[key][:len(want)]; !slices.Equal(got, want) {
			t.Errorf("key %s: calls %v, want %v (counts, 0 a timeout): a's timeout was lost in the hand-over", key, got, want)
		}
	}
}

// leaseWriteFault is a lease table client whose writes to the lease table
// fail while on is set: the worker can neither renew nor take a lease.
type leaseWriteFault struct {
	*awsdynamodb.Client
	table string
	on    atomic.Bool
}

func (c *leaseWriteFault) UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	if c.on.Load() && aws.ToString(in.TableName) == c.table {
		return nil, errors.New("leaseWriteFault: injected lease table write failure")
	}
	return c.Client.UpdateItem(ctx, in, opts...)
}

func (c *leaseWriteFault) PutItem(ctx context.Context, in *awsdynamodb.PutItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.PutItemOutput, error) {
	if c.on.Load() && aws.ToString(in.TableName) == c.table {
		return nil, errors.New("leaseWriteFault: injected lease table write failure")
	}
	return c.Client.PutItem(ctx, in, opts...)
}

// logWatch closes hit when the at-th record whose message is msg is
// logged through a hookHandler (see watch).
type logWatch struct {
	msg string
	at  int32
	n   atomic.Int32
	hit chan struct{}
}

// watch is a hookHandler's on for w.
func (w *logWatch) watch(r slog.Record) {
	if r.Message == w.msg && w.n.Add(1) == w.at {
		close(w.hit)
	}
}

// hookHandler passes records at WARN and above to Handler, and every
// record to on.
type hookHandler struct {
	slog.Handler
	on func(slog.Record)
}

func (h hookHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h hookHandler) Handle(ctx context.Context, r slog.Record) error {
	h.on(r)
	if r.Level < slog.LevelWarn {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h hookHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return hookHandler{h.Handler.WithAttrs(as), h.on}
}

func (h hookHandler) WithGroup(name string) slog.Handler {
	return hookHandler{h.Handler.WithGroup(name), h.on}
}

// A snapshot a worker took under an earlier hold of a lease is not stored
// under a later one: worker a's periodic save waits for a batch (held in
// its update function) while a loses the lease (its lease writes fail), b
// takes it, counts on from a's last snapshot and drains, and a takes the
// lease back. Released, a's save holds the state of the earlier hold. It is
// fenced off by b's claim, and a loads what b stored. Before, a stored it
// under the counter of its new hold, which the fence admitted, over b's
// snapshot: a then loaded its own stale state and read after b's
// checkpoint, so the records b counted were lost from the state.
func TestLeasesStatePerShardStaleSaveAfterRetake(t *testing.T) {
	t.Parallel()
	f := newCountFleet(t, 1)
	var armed atomic.Bool
	blocked, release := make(chan struct{}), make(chan struct{})
	var blockOnce, releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	f.count = func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
		return stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) {
			if len(vs) > 0 && armed.Load() {
				blockOnce.Do(func() { close(blocked) })
				<-release
			}
			return n + len(vs), true
		})
	}
	db := &leaseWriteFault{Client: f.env.DynamoDB(), table: f.table}
	retaken := &logWatch{msg: "leasetable: took lease", at: 2, hit: make(chan struct{})}
	f.logger = slog.New(hookHandler{testLogger().Handler(), retaken.watch})
	f.put()
	a, aDone := f.workerWith("a", db)
	f.waitExact("a counts round 1")
	f.count, f.logger = nil, nil // b counts without a gate, and its takes are not watched

	// a's batch of round 2 is held: the next periodic save waits for it.
	armed.Store(true)
	f.put()
	select {
	case <-blocked:
	case <-time.After(deadline):
		t.Fatal("a's batch of round 2 never ran")
	}

	// a loses the lease; b takes it, counts rounds 2 and 3 from a's last
	// snapshot and hands it back.
	db.on.Store(true)
	b, bDone := f.worker("b")
	f.waitFor("b takes the lease", func() bool { return f.holding("b") == 1 })
	f.waitExact("b counts rounds 1-2")
	f.put()
	f.waitExact("b counts rounds 1-3")
	f.drain("b", b, bDone)

	// a takes the lease back (its coordinator holds it again), then its
	// save goes on.
	db.on.Store(false)
	select {
	case <-retaken.hit:
	case <-time.After(deadline):
		t.Fatal("a did not take the lease back")
	}
	releaseOnce.Do(func() { close(release) })
	f.put()
	f.waitExact("a counts rounds 1-4 on b's state")
	f.drain("a", a, aDone)
}

// A lease table name too long for its state table (the name + "-state",
// at most 255 characters, DynamoDB's limit) is refused when Run starts a
// pipeline keeping state per shard, with an error wrapping
// ErrInvalidConfig that names Leases.TableName and its bound, before any
// table is touched. Before, the state table's CreateTable failed with
// DynamoDB's validation error after the lease table was made.
func TestLeasesStatePerShardTableNameTooLong(t *testing.T) {
	f := newCountFleet(t, 1)
	f.table = strings.Repeat("t", 250)
	p, done := f.worker("a")
	select {
	case err := <-done:
		if !errors.Is(err, kinesis.ErrInvalidConfig) || !strings.Contains(err.Error(), "Leases.TableName") {
			t.Errorf("Run = %v, want an error wrapping kinesis.ErrInvalidConfig naming Leases.TableName", err)
		}
	case <-time.After(deadline):
		p.Stop()
		t.Fatal("Run did not refuse a lease table name too long for its state table")
	}
	if _, err := f.env.DynamoDB().DescribeTable(t.Context(), &awsdynamodb.DescribeTableInput{TableName: aws.String(f.table)}); err == nil {
		t.Errorf("the lease table %s was created; want nothing touched", f.table)
	}
}

// panicsOnThree is a state codec of counts with a bug: it panics encoding
// a count of 3 or more.
type panicsOnThree struct{}

func (panicsOnThree) Encode(vs []int) ([]byte, error) {
	for _, v := range vs {
		if v >= 3 {
			panic("codec bug: a count of " + strconv.Itoa(v))
		}
	}
	return stream.GobCodec[int]().Encode(vs)
}

func (panicsOnThree) Decode(b []byte) ([]int, error) { return stream.GobCodec[int]().Decode(b) }

// A state kept per shard that cannot be snapshotted (its codec panics on a
// value, a poison record's) stops Run with an error naming the shard and
// the panic, as DESIGN.md promises and as a state that cannot be encoded
// for the recovery log does: at the first checkpoint interval, or at a
// drain, whose final snapshot fails. The receiver only warned, at every
// checkpoint interval, while its checkpoints stayed at the last snapshot
// and a shard read to its end was never marked SHARD_END, its children
// never read; a drain ended as if all was well.
func TestLeasesStatePerShardSnapshotFailureStopsRun(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, err error) {
		t.Helper()
		t.Logf("Run = %v", err)
		for _, want := range []string{"snapshot the state of shard shardId-", "panic: codec bug: a count of 3"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Run = %v, want an error containing %q", err, want)
			}
		}
	}
	fleet := func(t *testing.T) *countFleet {
		f := newCountFleet(t, 2)
		f.count = func(_ *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
			return stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true },
				stream.StateCodec[int](panicsOnThree{}))
		}
		f.put() // 3 records of each key: counts of 3
		return f
	}
	t.Run("running", func(t *testing.T) {
		t.Parallel()
		a, done := fleet(t).worker("a")
		defer a.Stop()
		select {
		case err := <-done:
			check(t, err)
		case <-time.After(deadline):
			t.Fatalf("Run did not stop within %v: it went on with a state it could not snapshot", deadline)
		}
	})
	t.Run("at a drain", func(t *testing.T) {
		t.Parallel()
		f := fleet(t)
		f.checkpoint = time.Hour // no snapshot before the drain's
		a, done := f.worker("a")
		f.waitExact("a counts")
		if err := a.Drain(t.Context()); err != nil {
			t.Logf("Drain = %v", err)
		}
		check(t, <-done)
	})
}
