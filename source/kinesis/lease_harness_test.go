package kinesis_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/lease"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// deadline guards every wait of the lease tests: a failure guard, never a
// sleep; the conditions are normally met in a few lease periods.
const deadline = 60 * time.Second

// testLogger logs warnings and errors of the workers.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// gate holds calls while closed (paused); the zero value is open.
type gate struct {
	mu   sync.Mutex
	hold chan struct{} // nil when open; closed by open
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hold == nil {
		g.hold = make(chan struct{})
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hold != nil {
		close(g.hold)
		g.hold = nil
	}
}

// closed reports whether the gate holds calls.
func (g *gate) closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hold != nil
}

// wait returns once the gate is open or ctx is done.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	hold := g.hold
	g.mu.Unlock()
	if hold == nil {
		return nil
	}
	select {
	case <-hold:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// write is one successful checkpoint write seen by a ddbSpy.
type write struct {
	shard, seq string
	at         time.Time
}

// ddbSpy wraps a real DynamoDB client: it holds every call while its gate
// is closed and records every successful checkpoint write.
type ddbSpy struct {
	next *dynamodb.Client
	gate gate

	mu     sync.Mutex
	writes []write
}

func (d *ddbSpy) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if err := d.gate.wait(ctx); err != nil {
		return nil, err
	}
	return d.next.CreateTable(ctx, in, o...)
}

func (d *ddbSpy) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if err := d.gate.wait(ctx); err != nil {
		return nil, err
	}
	return d.next.DescribeTable(ctx, in, o...)
}

func (d *ddbSpy) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if err := d.gate.wait(ctx); err != nil {
		return nil, err
	}
	return d.next.Scan(ctx, in, o...)
}

func (d *ddbSpy) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := d.gate.wait(ctx); err != nil {
		return nil, err
	}
	return d.next.GetItem(ctx, in, o...)
}

func (d *ddbSpy) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := d.gate.wait(ctx); err != nil {
		return nil, err
	}
	return d.next.PutItem(ctx, in, o...)
}

func (d *ddbSpy) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := d.gate.wait(ctx); err != nil {
		return nil, err
	}
	return d.next.DeleteItem(ctx, in, o...)
}

func (d *ddbSpy) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := d.gate.wait(ctx); err != nil {
		return nil, err
	}
	out, err := d.next.UpdateItem(ctx, in, o...)
	if ck, ok := in.ExpressionAttributeValues[":ckpt"].(*ddbtypes.AttributeValueMemberS); ok && err == nil {
		shard := in.Key["leaseKey"].(*ddbtypes.AttributeValueMemberS).Value
		d.mu.Lock()
		d.writes = append(d.writes, write{shard: shard, seq: ck.Value, at: time.Now()})
		d.mu.Unlock()
	}
	return out, err
}

// checkpoints returns the successful checkpoint writes, in order.
func (d *ddbSpy) checkpoints() []write {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]write(nil), d.writes...)
}

// kinesisSpy wraps a real Kinesis client and holds every call while its
// gate is closed; ListShards leaves out the shards hidden (see hide), as
// Kinesis leaves out a closed shard whose records passed the retention
// period.
type kinesisSpy struct {
	next *awskinesis.Client
	gate gate

	mu     sync.Mutex
	hidden map[string]bool
}

// hide makes ListShards leave out shard from now on.
func (k *kinesisSpy) hide(shard string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.hidden == nil {
		k.hidden = make(map[string]bool)
	}
	k.hidden[shard] = true
}

func (k *kinesisSpy) DescribeStreamSummary(ctx context.Context, in *awskinesis.DescribeStreamSummaryInput, o ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	if err := k.gate.wait(ctx); err != nil {
		return nil, err
	}
	return k.next.DescribeStreamSummary(ctx, in, o...)
}

func (k *kinesisSpy) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, o ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if err := k.gate.wait(ctx); err != nil {
		return nil, err
	}
	out, err := k.next.ListShards(ctx, in, o...)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.hidden) > 0 {
		shown := *out
		shown.Shards = slices.DeleteFunc(slices.Clone(out.Shards), func(s kintypes.Shard) bool { return k.hidden[aws.ToString(s.ShardId)] })
		out = &shown
	}
	return out, nil
}

func (k *kinesisSpy) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, o ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	if err := k.gate.wait(ctx); err != nil {
		return nil, err
	}
	return k.next.GetShardIterator(ctx, in, o...)
}

func (k *kinesisSpy) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, o ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	if err := k.gate.wait(ctx); err != nil {
		return nil, err
	}
	return k.next.GetRecords(ctx, in, o...)
}

// fleet is the workers of one test sharing a stream and a lease table.
type fleet struct {
	t      testing.TB
	env    *localaws.Env
	stream string
	table  string
	tick   chan struct{} // 1 slot: some worker ran a batch

	mu      sync.Mutex
	workers []*worker
}

func newFleet(t testing.TB, shards int) *fleet {
	t.Helper()
	env := kinesis.Servers.Env(t)
	name := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), name, shards); err != nil {
		t.Fatal(err)
	}
	return &fleet{t: t, env: env, stream: name, table: name, tick: make(chan struct{}, 1)}
}

// config is a worker's receiver config: fast polling, leases of
// leaseDuration, checkpoints every 100ms, clients wrapped by spies.
func (f *fleet) config(id string, leaseDuration time.Duration, ddb *ddbSpy, kc *kinesisSpy) kinesis.Config {
	return kinesis.Config{
		Stream: f.stream, App: "leasetest", InitialPosition: kinesis.TrimHorizon, Client: kc,
		PollInterval: 20 * time.Millisecond, ShardSyncInterval: 300 * time.Millisecond,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: 50 * time.Millisecond, Logger: testLogger(),
		Leases: &leasetable.Config{TableName: f.table, DynamoDB: ddb, WorkerID: id, LeaseDuration: leaseDuration, CheckpointInterval: 100 * time.Millisecond},
	}
}

// worker is one worker: a stream.Pipeline reading the stream through a
// leased receiver, its output collecting every record.
type worker struct {
	id     string
	r      *kinesis.Receiver
	sc     *stream.Pipeline
	ddb    *ddbSpy
	kc     *kinesisSpy
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	runErr error         // Run's result, once done is closed

	listener *workerListener

	// hold, closed (paused) before run, holds the output of every batch
	// with records; held gets a signal each time a batch starts waiting.
	hold      gate
	heldBatch chan struct{}

	mu   sync.Mutex
	recs []kinesis.Record
	errs []error // reported through source.Runtime.ReportError
}

// workerListener keeps what a worker's receiver reported.
type workerListener struct {
	stream.NopListener
	w *worker
}

// ReceiverError implements stream.Listener.
func (l *workerListener) ReceiverError(ri stream.ReceiverInfo) {
	l.w.mu.Lock()
	l.w.errs = append(l.w.errs, ri.Err)
	l.w.mu.Unlock()
}

// reported returns the errors the worker's receiver reported so far.
func (w *worker) reported() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.errs...)
}

// start starts a worker named id; edit, if not nil, edits its config.
func (f *fleet) start(id string, leaseDuration time.Duration, edit func(*kinesis.Config)) *worker {
	f.t.Helper()
	return f.startWith(id, leaseDuration, edit, nil)
}

// startWith is start with the driver's recovery log, if not nil.
func (f *fleet) startWith(id string, leaseDuration time.Duration, edit func(*kinesis.Config), log recovery.Opener) *worker {
	f.t.Helper()
	w := f.newWorker(id, leaseDuration, edit, log)
	f.run(w)
	return w
}

// newWorker is startWith without the start: see run.
func (f *fleet) newWorker(id string, leaseDuration time.Duration, edit func(*kinesis.Config), log recovery.Opener) *worker {
	f.t.Helper()
	w := &worker{id: id, ddb: &ddbSpy{next: f.env.DynamoDB()}, kc: &kinesisSpy{next: f.env.Kinesis()}, done: make(chan struct{}), listener: &workerListener{},
		heldBatch: make(chan struct{}, 1)}
	cfg := f.config(id, leaseDuration, w.ddb, w.kc)
	if edit != nil {
		edit(&cfg)
	}
	r, err := kinesis.New(cfg)
	if err != nil {
		f.t.Fatalf("worker %s: %v", id, err)
	}
	w.listener.w = w
	sc, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, BlockInterval: 20 * time.Millisecond, Logger: testLogger(), Recovery: log,
		Listeners: []stream.Listener{w.listener}})
	if err != nil {
		f.t.Fatal(err)
	}
	w.r, w.sc = r, sc
	stream.ForEachBatch(stream.From(sc, r), func(ctx context.Context, b *batch.Batch[kinesis.Record]) error {
		if len(b.Records()) > 0 {
			if w.hold.closed() {
				select {
				case w.heldBatch <- struct{}{}:
				default:
				}
			}
			if err := w.hold.wait(ctx); err != nil {
				return err
			}
		}
		w.mu.Lock()
		w.recs = append(w.recs, b.Records()...)
		w.mu.Unlock()
		select {
		case f.tick <- struct{}{}:
		default:
		}
		return nil
	})
	return w
}

// run starts a worker newWorker built.
func (f *fleet) run(w *worker) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		w.runErr = w.sc.Run(ctx)
	}()
	f.mu.Lock()
	f.workers = append(f.workers, w)
	f.mu.Unlock()
	f.t.Cleanup(func() { w.kill(); w.ddb.gate.resume(); w.kc.gate.resume(); w.hold.resume() })
}

// kill stops the worker at once, without cleanup: its leases are left to
// expire. Idempotent.
func (w *worker) kill() {
	w.sc.Stop()         // now, without a drain: cancelling Run's ctx would drain and hand the leases back
	w.ddb.gate.resume() // a paused worker must be able to see ctx
	w.kc.gate.resume()
	<-w.done
}

// drain stops the worker gracefully and checks Run's result.
func (w *worker) drain(t *testing.T) {
	t.Helper()
	w.sc.Drain(context.Background())
	<-w.done
	if w.runErr != nil {
		t.Errorf("worker %s: Run after Drain: %v", w.id, w.runErr)
	}
}

// records returns what the worker's output received, in order.
func (w *worker) records() []kinesis.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]kinesis.Record(nil), w.recs...)
}

// held returns the shards whose leases the worker holds.
func (w *worker) held() map[string]bool {
	out := map[string]bool{}
	for _, l := range w.r.HeldLeases() {
		out[l.Shard] = true
	}
	return out
}

// waitFor waits until cond holds, checking it after every batch of any
// worker; it fails the test after deadline, saying what.
func (f *fleet) waitFor(what string, cond func() bool) time.Duration {
	f.t.Helper()
	start := time.Now()
	guard := time.NewTimer(deadline)
	defer guard.Stop()
	for !cond() {
		select {
		case <-f.tick:
		case <-guard.C:
			f.t.Fatalf("not within %v: %s", deadline, what)
		}
	}
	return time.Since(start)
}

// put puts payloads on the stream, keys spread over the shards.
func (f *fleet) put(data [][]byte) {
	f.t.Helper()
	if err := f.env.PutRecords(f.t.Context(), f.stream, data, nil); err != nil {
		f.t.Fatal(err)
	}
}

// waitReading puts probes until w delivers one: a reader of w that starts
// at LATEST, some time after w's Run or take, reads the records put after
// it returns.
func (f *fleet) waitReading(w *worker) {
	f.t.Helper()
	probes := 0
	f.waitFor(w.id+" reads", func() bool {
		for _, r := range w.records() {
			if len(r.Data) > 0 {
				return true
			}
		}
		f.put([][]byte{fmt.Appendf(nil, "probe-%d", probes)})
		probes++
		return false
	})
}

// delivered counts each payload over every worker's output.
func (f *fleet) delivered() map[string]int {
	f.mu.Lock()
	ws := append([]*worker(nil), f.workers...)
	f.mu.Unlock()
	seen := map[string]int{}
	for _, w := range ws {
		for _, r := range w.records() {
			seen[string(r.Data)]++
		}
	}
	return seen
}

// allDelivered reports whether every payload of want reached some output.
func (f *fleet) allDelivered(want [][]byte) func() bool {
	return func() bool {
		seen := f.delivered()
		for _, p := range want {
			if seen[string(p)] == 0 {
				return false
			}
		}
		return true
	}
}

// leases reads the lease table (its readable leases).
func (f *fleet) leases() map[string]lease.Lease {
	f.t.Helper()
	out, err := f.tryLeases()
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// tryLeases reads the lease table (its readable leases), which may not
// exist yet.
func (f *fleet) tryLeases() (map[string]lease.Lease, error) {
	tbl, err := lease.NewTable(lease.TableConfig{Name: f.table, Client: f.env.DynamoDB()})
	if err != nil {
		return nil, err
	}
	ls, _, err := tbl.ListAll(f.t.Context())
	if err != nil {
		return nil, err
	}
	out := make(map[string]lease.Lease, len(ls))
	for _, l := range ls {
		out[l.Shard] = l
	}
	return out, nil
}

// payloads returns n distinct payloads.
func payloads(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s-%05d", prefix, i)
	}
	return out
}

// lastSeqs returns the greatest sequence number read per shard, from the
// stream itself.
func (f *fleet) lastSeqs() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for shard, recs := range f.readAll() {
		if len(recs) > 0 {
			out[shard] = aws.ToString(recs[len(recs)-1].SequenceNumber)
		}
	}
	return out
}

// readAll returns every record of every shard, read from TRIM_HORIZON with
// a plain client.
func (f *fleet) readAll() map[string][]kintypes.Record {
	f.t.Helper()
	ctx := f.t.Context()
	c := f.env.Kinesis()
	out := map[string][]kintypes.Record{}
	for _, s := range f.shards() {
		it, err := c.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String(f.stream), ShardId: s.ShardId, ShardIteratorType: "TRIM_HORIZON"})
		if err != nil {
			f.t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			got, err := c.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				f.t.Fatal(err)
			}
			out[*s.ShardId] = append(out[*s.ShardId], got.Records...)
			if len(got.Records) == 0 {
				break // caught up (an open shard never ends)
			}
			iter = got.NextShardIterator
		}
	}
	return out
}

// key spreads records over shards by their index.
func key(i int) string { return strconv.Itoa(i) }

// split splits the stream's only shard in two and waits until the stream is
// active again; it returns the parent's ID.
func (f *fleet) split() string {
	f.t.Helper()
	ctx := f.t.Context()
	c := f.env.Kinesis()
	shards := f.shards()
	if len(shards) != 1 {
		f.t.Fatalf("split: the stream has %d shards, want 1", len(shards))
	}
	parent := shards[0]
	lo, _ := new(big.Int).SetString(*parent.HashKeyRange.StartingHashKey, 10)
	hi, _ := new(big.Int).SetString(*parent.HashKeyRange.EndingHashKey, 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	if _, err := c.SplitShard(ctx, &awskinesis.SplitShardInput{
		StreamName: aws.String(f.stream), ShardToSplit: parent.ShardId, NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		f.t.Fatal(err)
	}
	f.awaitActive()
	return *parent.ShardId
}

// awaitActive waits until the stream is active again after a reshard.
func (f *fleet) awaitActive() {
	f.t.Helper()
	for {
		// A server-side state change has nothing to wait on: ask again
		// (each call is a round trip; the test's context bounds the loop).
		out, err := f.env.Kinesis().DescribeStreamSummary(f.t.Context(), &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(f.stream)})
		if err != nil {
			f.t.Fatal(err)
		}
		if out.StreamDescriptionSummary.StreamStatus == kintypes.StreamStatusActive {
			return
		}
	}
}

// shards lists the stream's shards.
func (f *fleet) shards() []kintypes.Shard {
	f.t.Helper()
	out, err := f.env.Kinesis().ListShards(f.t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(f.stream)})
	if err != nil {
		f.t.Fatal(err)
	}
	return out.Shards
}

// deliveredAll reports whether every payload of want reached w's output.
func (w *worker) deliveredAll(want [][]byte) bool {
	seen := map[string]bool{}
	for _, r := range w.records() {
		seen[string(r.Data)] = true
	}
	for _, p := range want {
		if !seen[string(p)] {
			return false
		}
	}
	return true
}
