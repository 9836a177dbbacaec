package kinesis

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source"
)

// servers is one kinesalite and one dynalite (for the lease tests of
// package kinesis_test, see export_test.go) for every test of the package.
var servers = localaws.NewShared(localaws.Options{
	Kinesis:  true,
	DynamoDB: true,
	Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
})

// mockServers is one kinesis-mock, for the tests of what kinesalite lacks
// (enhanced fan-out, UpdateShardCount, ChildShards), started by the first
// of them: each kinesis-mock takes seconds to start.
var mockServers = localaws.NewShared(localaws.Options{KinesisMock: true})

// TestMain runs the tests, then stops both sets of shared servers.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range []*localaws.Shared{servers, mockServers} {
		if err := s.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "source/kinesis: close shared servers: %v\n", err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

// waitLimit guards every wait for records: a failure guard, not a sleep.
const waitLimit = 90 * time.Second

// pushed is one block as the test's push function received it.
type pushed struct {
	info    batch.BlockInfo
	records []Record
}

// collector is a push function that keeps every block, in push order, and
// signals when it holds want records.
type collector struct {
	want int
	full chan struct{} // closed once want records were pushed

	mu      sync.Mutex
	blocks  []pushed
	total   int
	reports []error
}

func newCollector(want int) *collector {
	return &collector{want: want, full: make(chan struct{})}
}

func (c *collector) push(_ context.Context, b source.Block[Record]) (batch.BlockInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	info := batch.BlockInfo{ID: batch.BlockID{Seq: uint64(len(c.blocks))}, Ranges: b.Ranges, Count: len(b.Records)}
	c.blocks = append(c.blocks, pushed{info: info, records: b.Records})
	before := c.total
	c.total += len(b.Records)
	if before < c.want && c.total >= c.want {
		close(c.full)
	}
	return info, nil
}

func (c *collector) reportError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reports = append(c.reports, err)
}

func (c *collector) snapshot() []pushed {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pushed(nil), c.blocks...)
}

func (c *collector) records() []Record {
	var out []Record
	for _, b := range c.snapshot() {
		out = append(out, b.records...)
	}
	return out
}

// running is a receiver started by startReceiver.
type running struct {
	r    *Receiver
	c    *collector
	errc chan error
}

// startReceiver starts a receiver of cfg with a collector expecting want
// records, and stops it at the end of the test.
func startReceiver(t *testing.T, cfg Config, want int) *running {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c := newCollector(want)
	run := &running{r: r, c: c, errc: make(chan error, 1)}
	rt := source.Runtime[Record]{Push: c.push, BlockInterval: 5 * time.Millisecond, ReportError: c.reportError}
	go func() { run.errc <- r.Start(context.Background(), rt) }()
	t.Cleanup(func() { run.stop(t) })
	return run
}

// wait waits until the collector is full, failing the test if Start
// returns first or the guard expires.
func (run *running) wait(t *testing.T) {
	t.Helper()
	guard := time.NewTimer(waitLimit)
	defer guard.Stop()
	select {
	case <-run.c.full:
	case err := <-run.errc:
		run.errc <- err
		t.Fatalf("Start returned before all records arrived: %v", err)
	case <-guard.C:
		t.Fatalf("only %d of %d records arrived within %v; stats %+v", len(run.c.records()), run.c.want, waitLimit, run.r.Stats())
	}
}

// stop stops the receiver and checks Start returned nil. Idempotent.
func (run *running) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := run.r.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
		return
	}
	// Stop returned, so Start has returned: its result is on its way.
	select {
	case err := <-run.errc:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
		run.errc <- nil
	case <-ctx.Done():
		t.Error("Stop returned, Start did not")
	}
}

// baseConfig is a config for a local stream with fast polling.
func baseConfig(env *localaws.Env, stream string) Config {
	awsCfg := env.AWSConfig()
	return Config{
		Stream: stream, App: "test", InitialPosition: TrimHorizon, AWS: &awsCfg, Endpoint: env.KinesisEndpoint,
		PollInterval: time.Millisecond, ShardSyncInterval: 20 * time.Millisecond,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: 20 * time.Millisecond,
	}
}

// payloads returns n distinct record payloads.
func payloads(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s-%05d", prefix, i)
	}
	return out
}

// newStream creates a stream of shards shards on kinesalite.
func newStream(t *testing.T, env *localaws.Env, shards int) string {
	t.Helper()
	name := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), name, shards); err != nil {
		t.Fatal(err)
	}
	return name
}

// checkExactlyOnce checks that got holds every payload of want exactly once.
func checkExactlyOnce(t *testing.T, want [][]byte, got []Record) {
	t.Helper()
	seen := make(map[string]int, len(got))
	for _, r := range got {
		seen[string(r.Data)]++
	}
	missing, dup := 0, 0
	for _, w := range want {
		switch seen[string(w)] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	if missing > 0 || dup > 0 || len(got) != len(want) {
		t.Errorf("got %d records for %d payloads: %d missing, %d duplicated", len(got), len(want), missing, dup)
	}
}

// checkShardOrder checks that each shard's records come in sequence order.
func checkShardOrder(t *testing.T, got []Record) {
	t.Helper()
	last := map[string]Record{}
	for _, r := range got {
		prev, ok := last[r.ShardID]
		if ok {
			c := batch.CompareSeq(prev.SequenceNumber, r.SequenceNumber)
			if c > 0 || c == 0 && prev.SubSequenceNumber >= r.SubSequenceNumber {
				t.Fatalf("shard %s: record %s/%d after %s/%d", r.ShardID, r.SequenceNumber, r.SubSequenceNumber, prev.SequenceNumber, prev.SubSequenceNumber)
			}
		}
		last[r.ShardID] = r
	}
}

// checkRanges checks that each block's ranges cover exactly its records,
// in order.
func checkRanges(t *testing.T, stream string, blocks []pushed) {
	t.Helper()
	for _, b := range blocks {
		recs := b.records
		for _, rg := range b.info.Ranges {
			if err := checkRange(rg); err != nil || rg.Stream != stream {
				t.Fatalf("block %v: bad range %v: %v", b.info.ID, rg, err)
			}
			if rg.Count > len(recs) {
				t.Fatalf("block %v: range %v counts more records than the block has left (%d)", b.info.ID, rg, len(recs))
			}
			part := recs[:rg.Count]
			recs = recs[rg.Count:]
			for _, r := range part {
				if r.ShardID != rg.Shard || batch.CompareSeq(r.SequenceNumber, rg.First) < 0 || batch.CompareSeq(r.SequenceNumber, rg.Last) > 0 {
					t.Fatalf("block %v: record %s/%s outside its range %v", b.info.ID, r.ShardID, r.SequenceNumber, rg)
				}
			}
			if part[0].SequenceNumber != rg.First || part[len(part)-1].SequenceNumber != rg.Last {
				t.Fatalf("block %v: range %v, records from %s to %s", b.info.ID, rg, part[0].SequenceNumber, part[len(part)-1].SequenceNumber)
			}
		}
		if len(recs) != 0 {
			t.Fatalf("block %v: %d records not covered by a range", b.info.ID, len(recs))
		}
	}
}

// checkRecompute recomputes every block and compares it with the original.
func checkRecompute(t *testing.T, r *Receiver, blocks []pushed) {
	t.Helper()
	for _, b := range blocks {
		got, err := r.Recompute(t.Context(), b.info)
		if err != nil {
			t.Fatalf("Recompute(%v): %v", b.info.ID, err)
		}
		if diff := cmp.Diff(b.records, got); diff != "" {
			t.Fatalf("Recompute(%v) (-want +got):\n%s", b.info.ID, diff)
		}
	}
}

// checkLineage checks that no record of a child shard was pushed before
// the block holding its parents' last records, using the shard list of c.
func checkLineage(t *testing.T, ctx context.Context, c *awskinesis.Client, stream string, blocks []pushed) {
	t.Helper()
	out, err := c.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	first, last := map[string]int{}, map[string]int{}
	for i, b := range blocks {
		for _, r := range b.records {
			if _, ok := first[r.ShardID]; !ok {
				first[r.ShardID] = i
			}
			last[r.ShardID] = i
		}
	}
	children := 0
	for _, s := range out.Shards {
		id := aws.ToString(s.ShardId)
		for _, p := range []string{aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId)} {
			if p == "" {
				continue
			}
			children++
			cf, childRead := first[id]
			pl, parentRead := last[p]
			if childRead && parentRead && cf <= pl {
				t.Errorf("child %s: first record in block %d, parent %s: last record in block %d", id, cf, p, pl)
			}
		}
	}
	if children == 0 {
		t.Error("the stream has no child shards: the reshard did not happen")
	}
}

// waitActive waits until the stream is ACTIVE again after a reshard.
func waitActive(t *testing.T, c *awskinesis.Client, stream string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	for {
		out, err := c.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		if out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return
		}
		// A server-side state change has nothing to wait on: ask again (each
		// call is a round trip; ctx bounds the loop).
	}
}

// midHashKey returns the middle of a shard's hash key range, to split it.
func midHashKey(s types.Shard) string {
	lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
	mid := new(big.Int).Add(lo, hi)
	return mid.Rsh(mid, 1).Add(mid, big.NewInt(1)).String()
}

// splitInHalf splits the first open shard of stream in the middle of its
// hash key range, waits until the stream is ACTIVE again, and returns the
// shard it split.
func splitInHalf(t *testing.T, c *awskinesis.Client, stream string) types.Shard {
	t.Helper()
	parent := openShards(t, c, stream)[0]
	if _, err := c.SplitShard(t.Context(), &awskinesis.SplitShardInput{
		StreamName: aws.String(stream), ShardToSplit: parent.ShardId, NewStartingHashKey: aws.String(midHashKey(parent)),
	}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, c, stream)
	return parent
}

// openShards returns the open shards of stream.
func openShards(t *testing.T, c *awskinesis.Client, stream string) []types.Shard {
	t.Helper()
	out, err := c.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	var open []types.Shard
	for _, s := range out.Shards {
		if s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, s)
		}
	}
	return open
}

// hookClient wraps a real client to watch or alter its answers.
type hookClient struct {
	Client
	listShards       func(ctx context.Context, in *awskinesis.ListShardsInput, next Client) (*awskinesis.ListShardsOutput, error)
	getShardIterator func(ctx context.Context, in *awskinesis.GetShardIteratorInput, next Client) (*awskinesis.GetShardIteratorOutput, error)
	getRecords       func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error)
}

func (h *hookClient) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, _ ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if h.listShards != nil {
		return h.listShards(ctx, in, h.Client)
	}
	return h.Client.ListShards(ctx, in)
}

func (h *hookClient) GetShardIterator(ctx context.Context, in *awskinesis.GetShardIteratorInput, _ ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	if h.getShardIterator != nil {
		return h.getShardIterator(ctx, in, h.Client)
	}
	return h.Client.GetShardIterator(ctx, in)
}

func (h *hookClient) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	if h.getRecords != nil {
		return h.getRecords(ctx, in, h.Client)
	}
	return h.Client.GetRecords(ctx, in)
}

// pagedListing is a ListShards hook that serves each real, full listing one
// shard per page, every page but the last with a NextToken, as Kinesis pages
// the shards of a large stream (kinesalite ignores NextToken and returns
// every shard at once). Like Kinesis, it refuses a call that names the
// stream and carries a token, or neither, and a token it did not issue.
type pagedListing struct {
	mu       sync.Mutex
	issued   int                      // tokens issued so far
	rest     map[string][]types.Shard // the shards after each issued token
	followed int                      // calls that carried a valid token
}

func newPagedListing() *pagedListing {
	return &pagedListing{rest: make(map[string][]types.Shard)}
}

func (p *pagedListing) listShards(ctx context.Context, in *awskinesis.ListShardsInput, next Client) (*awskinesis.ListShardsOutput, error) {
	named := in.StreamName != nil || in.StreamARN != nil
	if in.NextToken == nil {
		if !named {
			return nil, &types.InvalidArgumentException{Message: aws.String("either NextToken or StreamName should be provided")}
		}
		out, err := next.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		return p.page(out.Shards), nil
	}
	if named {
		return nil, &types.InvalidArgumentException{Message: aws.String("NextToken and StreamName cannot be provided together")}
	}
	p.mu.Lock()
	rest, ok := p.rest[*in.NextToken]
	delete(p.rest, *in.NextToken)
	if ok {
		p.followed++
	}
	p.mu.Unlock()
	if !ok {
		return nil, &types.InvalidArgumentException{Message: aws.String("unknown NextToken " + *in.NextToken)}
	}
	return p.page(rest), nil
}

// page returns the first of shards, with a token for the others if any.
func (p *pagedListing) page(shards []types.Shard) *awskinesis.ListShardsOutput {
	if len(shards) <= 1 {
		return &awskinesis.ListShardsOutput{Shards: shards}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.issued++
	token := fmt.Sprintf("token-%d", p.issued)
	p.rest[token] = shards[1:]
	return &awskinesis.ListShardsOutput{Shards: shards[:1], NextToken: aws.String(token)}
}

// tokensFollowed returns how many calls carried a token this hook issued.
func (p *pagedListing) tokensFollowed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.followed
}
