package kinesis

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source"
)

// read is one scripted GetRecords answer of a pacedClient.
type read struct {
	records int           // records returned
	behind  int64         // MillisBehindLatest; < 0 leaves it unset
	latency time.Duration // how long the call takes
	size    int           // bytes of each record's data; 0 means 1
}

// pacedClient is an in-process Kinesis of one shard that answers
// GetRecords from a script, each call taking its latency in (virtual)
// time, and records when each call started. The last answer ends the
// shard. Only the pacing of the reader is tested with it; the AWS paths
// are tested against kinesalite.
type pacedClient struct {
	script []read
	done   chan struct{} // closed when the last answer is served

	mu     sync.Mutex
	starts []time.Time
	seq    int
}

func (c *pacedClient) DescribeStreamSummary(context.Context, *awskinesis.DescribeStreamSummaryInput, ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	return &awskinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{}}, nil
}

func (c *pacedClient) ListShards(context.Context, *awskinesis.ListShardsInput, ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	return &awskinesis.ListShardsOutput{Shards: []types.Shard{{ShardId: aws.String("shard-0")}}}, nil
}

func (c *pacedClient) GetShardIterator(context.Context, *awskinesis.GetShardIteratorInput, ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	return &awskinesis.GetShardIteratorOutput{ShardIterator: aws.String("0")}, nil
}

func (c *pacedClient) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	c.mu.Lock()
	c.starts = append(c.starts, time.Now())
	c.mu.Unlock()
	i, _ := strconv.Atoi(aws.ToString(in.ShardIterator))
	r := c.script[i]
	if err := clock.Sleep(ctx, clock.Real{}, r.latency); err != nil {
		return nil, err
	}
	out := &awskinesis.GetRecordsOutput{}
	if r.behind >= 0 {
		out.MillisBehindLatest = aws.Int64(r.behind)
	}
	c.mu.Lock()
	data := make([]byte, max(r.size, 1))
	for range r.records {
		c.seq++
		out.Records = append(out.Records, types.Record{SequenceNumber: aws.String(strconv.Itoa(c.seq)), PartitionKey: aws.String("k"), Data: data})
	}
	c.mu.Unlock()
	if i+1 < len(c.script) {
		out.NextShardIterator = aws.String(strconv.Itoa(i + 1))
	} else {
		close(c.done)
	}
	return out, nil
}

// gaps returns the time between the starts of consecutive calls.
func (c *pacedClient) gaps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(c.starts); i++ {
		out = append(out, c.starts[i].Sub(c.starts[i-1]))
	}
	return out
}

// TestReadPacing checks, in virtual time, when a shard reader calls
// GetRecords again: with more records waiting (behind the tip, a full
// page, a page cut by the response size limit), as soon as
// MinReadInterval passed since the last call started; caught up or
// empty-handed, PollInterval
// after the call returned, and never sooner than MinReadInterval. Stats
// report the MillisBehindLatest of the latest call that had one.
func TestReadPacing(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		poll     time.Duration
		minRead  time.Duration
		perRead  int // RecordsPerRead
		script   []read
		wantGaps []time.Duration
		// wantBehind is the shard's MillisBehindLatest in Stats at the end.
		wantBehind int64
	}{
		{
			name: "defaults", script: []read{
				{3, 5000, 50 * ms, 0},  // behind, fast call: 200ms after it started
				{3, 5000, 300 * ms, 0}, // behind, slow call: at once
				{3, 0, 10 * ms, 0},     // caught up: poll
				{0, 0, 10 * ms, 0},     // empty: poll
				{0, 1000, 10 * ms, 0},  // empty though behind: poll
				{2, -1, 10 * ms, 0},    // no MillisBehindLatest: poll
				{0, 1234, 10 * ms, 0},  // empty though behind: poll
				{0, -1, 10 * ms, 0},    // the shard ends; no MillisBehindLatest: 1234 stays
			},
			wantGaps:   []time.Duration{200 * ms, 300 * ms, 510 * ms, 510 * ms, 510 * ms, 510 * ms, 510 * ms},
			wantBehind: 1234,
		},
		{
			// kinesalite always answers MillisBehindLatest 0, and Kinesis
			// may at the tip of a busy shard: a full page still means
			// more is waiting.
			name: "full pages", perRead: 3, script: []read{
				{3, 0, 50 * ms, 0},  // full, fast: 200ms after it started
				{3, -1, 10 * ms, 0}, // full, no MillisBehindLatest
				{2, 0, 10 * ms, 0},  // short page at the tip: poll
				{3, 0, 300 * ms, 0}, // full, slow: at once
				{0, 0, 10 * ms, 0},
			},
			wantGaps: []time.Duration{200 * ms, 200 * ms, 510 * ms, 300 * ms},
		},
		{
			name: "page cut by the response size limit", script: []read{
				{10, 0, 10 * ms, 1 << 20}, // 10 MiB: cut, more is waiting
				{8, 0, 10 * ms, 1 << 20},  // 8 MiB: the tip
				{0, 0, 10 * ms, 0},
			},
			wantGaps: []time.Duration{200 * ms, 510 * ms},
		},
		{
			name: "poll shorter than the minimum", poll: 50 * ms, minRead: 200 * ms, script: []read{
				{0, 0, 10 * ms, 0}, // empty: the minimum wins
				{1, 0, 10 * ms, 0}, // caught up: the minimum wins
				{1, 10, 10 * ms, 0},
				{0, 0, 250 * ms, 0}, // the poll after a slow call
				{0, 0, 10 * ms, 0},
			},
			wantGaps: []time.Duration{200 * ms, 200 * ms, 200 * ms, 300 * ms},
		},
		{
			name: "tight minimum", poll: time.Second, minRead: ms, script: []read{
				{5, 100, 20 * ms, 0}, // behind: back to back
				{5, 100, 20 * ms, 0},
				{5, 0, 20 * ms, 0},
				{0, 0, 20 * ms, 0},
			},
			wantGaps:   []time.Duration{20 * ms, 20 * ms, 1020 * ms},
			wantBehind: 0, // the latest, not the greatest
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &pacedClient{script: tt.script, done: make(chan struct{})}
				r := runPaced(t, c, Config{PollInterval: tt.poll, MinReadInterval: tt.minRead, RecordsPerRead: tt.perRead}, 0, 10*ms)
				if diff := cmp.Diff(tt.wantGaps, c.gaps()); diff != "" {
					t.Errorf("time between GetRecords calls (-want +got):\n%s", diff)
				}
				if got := r.Stats().Shards["shard-0"].MillisBehindLatest; got != tt.wantBehind {
					t.Errorf("Stats: shard-0 MillisBehindLatest %d, want %d", got, tt.wantBehind)
				}
			})
		})
	}
}

// TestReadPacingAlignedToBatches checks, in virtual time, that a reader at
// the tip of its shard times its reads to end just before the block seal
// that precedes a batch cut, when the driver says its batch interval: each
// read starts lead before a batch time (lead: the seal's lead, twice the
// call's usual duration and a margin, rounded up to 10ms), or PollInterval
// before that (reads stay PollInterval apart), so what it reads is in
// that batch; never less than MinReadInterval after the read before.
// Without a batch interval the reader keeps its PollInterval
// (TestReadPacing).
func TestReadPacingAlignedToBatches(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name             string
		poll             time.Duration
		batchIv, blockIv time.Duration
		wantStarts       []time.Duration // of every call but the first, since the start of the test
	}{
		{
			// lead = 20ms seal lead + 2*10ms + 25ms margin (1s/40) -> 70ms:
			// slots at 430ms and 930ms in every second.
			name: "defaults, 1s batches", batchIv: time.Second, blockIv: 200 * ms,
			wantStarts: []time.Duration{430 * ms, 930 * ms, 1430 * ms, 1930 * ms},
		},
		{
			// lead = 10ms + 2*10ms + 5ms -> 40ms: slots at 60ms in every
			// 100ms; the first slot after the read at 0 that is 200ms
			// (MinReadInterval) later is at 260ms.
			name: "low latency, 100ms batches, 200ms poll", poll: 200 * ms, batchIv: 100 * ms, blockIv: 100 * ms,
			wantStarts: []time.Duration{260 * ms, 460 * ms, 660 * ms, 860 * ms},
		},
		{
			// README's low-latency configuration at harlow/kinesis-consumer's
			// rate (a read every 250ms): lead 5ms + 2*10ms + 5ms -> 30ms,
			// slots at 20ms in every 50ms, the first at 270ms (within a
			// step of the 250ms wait after the read at 0-10ms). A read
			// every 250ms exactly (4 per second, as asked), each at a slot:
			// the batch interval divides PollInterval, and MinReadInterval
			// (200ms) below it leaves the slack a late read needs to keep
			// its phase.
			name: "low latency, 50ms batches, 250ms poll", poll: 250 * ms, batchIv: 50 * ms, blockIv: 50 * ms,
			wantStarts: []time.Duration{270 * ms, 520 * ms, 770 * ms, 1020 * ms, 1270 * ms, 1520 * ms},
		},
		{
			// Two batches per read: the same, at 85ms in every 125ms.
			name: "125ms batches, 250ms poll", poll: 250 * ms, batchIv: 125 * ms, blockIv: 125 * ms,
			wantStarts: []time.Duration{210 * ms, 460 * ms, 710 * ms, 960 * ms, 1210 * ms, 1460 * ms},
		},
		{
			// 200ms batches with the default 500ms poll: lead 20ms + 2*10ms
			// + 5ms -> 50ms, slots at 150ms in every 200ms, the latest
			// within the 500ms wait.
			name: "200ms batches, default poll", batchIv: 200 * ms, blockIv: 200 * ms,
			wantStarts: []time.Duration{350 * ms, 750 * ms, 1150 * ms, 1550 * ms},
		},
		{
			// The block interval does not divide the batch interval: no
			// seal comes just before a cut, the reader keeps its poll.
			name: "block interval not dividing the batch interval", batchIv: time.Second, blockIv: 300 * ms,
			wantStarts: []time.Duration{510 * ms, 1020 * ms, 1530 * ms, 2040 * ms},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				script := make([]read, len(tt.wantStarts)+1)
				for i := range script {
					script[i] = read{records: 1, latency: 10 * ms}
				}
				got, _ := alignedReads(t, script, tt.poll, tt.batchIv, tt.blockIv)
				if diff := cmp.Diff(tt.wantStarts, got); diff != "" {
					t.Errorf("GetRecords call starts (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// runPaced runs a receiver of cfg (its stream, client and shard sync set
// here) reading c's one shard, with the driver's batch and block
// intervals, until c's script ends, and stops it. Its push stores
// nothing, and there is no byte budget: this push never completes its
// blocks, and the budget (tested on its own) would shrink the pages. Call
// it in a synctest bubble.
func runPaced(t *testing.T, c *pacedClient, cfg Config, batchIv, blockIv time.Duration) *Receiver {
	t.Helper()
	cfg.Stream, cfg.App, cfg.InitialPosition, cfg.Client, cfg.ShardSyncInterval = "s", "a", TrimHorizon, c, time.Hour
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	push := func(_ context.Context, b source.Block[Record]) (batch.BlockInfo, error) {
		return batch.BlockInfo{Ranges: b.Ranges, Count: len(b.Records)}, nil
	}
	errc := make(chan error, 1)
	go func() {
		errc <- r.Start(t.Context(), source.Runtime[Record]{Push: push, BatchInterval: batchIv, BlockInterval: blockIv, MaxBufferedBytes: -1})
	}()
	<-c.done
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Start: %v", err)
	}
	return r
}

// alignedReads runs a reader of one shard answered by script, with the
// given PollInterval and the driver's batch and block intervals, in
// synctest's virtual time (the caller's bubble), until the script ends.
// It returns when each call but the first started, since the start of the
// bubble (on a whole second), and the time between consecutive calls.
func alignedReads(t *testing.T, script []read, poll, batchIv, blockIv time.Duration) (starts, gaps []time.Duration) {
	t.Helper()
	begin := time.Now()
	c := &pacedClient{script: script, done: make(chan struct{})}
	runPaced(t, c, Config{PollInterval: poll}, batchIv, blockIv)
	c.mu.Lock()
	for _, s := range c.starts[1:] {
		starts = append(starts, s.Sub(begin))
	}
	c.mu.Unlock()
	return starts, c.gaps()
}

// TestReadPacingAfterASlowCall checks, in virtual time, that one slow
// GetRecords call (or a stall of a busy machine) does not move a reader at
// the tip out of phase with its batches: the reads after it stay a
// PollInterval apart, each still starting just before a batch time, the
// lead one leadStep longer than before. Before, the call counted whole in
// the reader's moving lateness (a quarter of 400ms), the lead grew by
// 200ms, past a batch interval, and the reads after it came 270-300ms
// apart, off their slots, ending up to a batch interval before their
// batch was cut.
func TestReadPacingAfterASlowCall(t *testing.T) {
	ms := time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		script := make([]read, 9)
		for i := range script {
			script[i] = read{records: 1, latency: 10 * ms}
		}
		script[3].latency = 400 * ms
		got, _ := alignedReads(t, script, 250*ms, 125*ms, 125*ms)
		want := []time.Duration{210 * ms, 460 * ms, 710 * ms, 1325 * ms, 1575 * ms, 1825 * ms, 2075 * ms, 2325 * ms}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetRecords call starts (-want +got):\n%s", diff)
		}
	})
}

// TestReadPacingKeepsRateAsLeadShrinks checks, in virtual time, that a
// reader at the tip reads no more often than PollInterval when its calls
// get faster and the lead of its reads shrinks a step: the slot it aims at
// moves a step later than PollInterval after the call, and it waits that
// step. Before, it took the slot a batch earlier (50ms batches and a 250ms
// poll: a read 210ms after the one before), more reads than PollInterval
// allows, each time the lead shrank.
func TestReadPacingKeepsRateAsLeadShrinks(t *testing.T) {
	ms := time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		script := make([]read, 12)
		for i := range script {
			script[i] = read{records: 1, latency: ms}
		}
		for i := range 3 {
			script[i].latency = 30 * ms // the lead grows to 70ms, then shrinks as calls take 1ms
		}
		got, gaps := alignedReads(t, script, 250*ms, 50*ms, 50*ms)
		// Lead 70ms after 30ms calls: slots at 30ms in every 50ms; then a
		// step later at each step the lead shrinks.
		want := []time.Duration{280 * ms, 530 * ms, 780 * ms, 1040 * ms, 1300 * ms, 1560 * ms, 1810 * ms, 2070 * ms, 2320 * ms, 2580 * ms, 2830 * ms}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetRecords call starts (-want +got):\n%s", diff)
		}
		for i, g := range gaps {
			if g < 250*ms {
				t.Errorf("call %d started %v after the one before, want >= PollInterval (250ms)", i+1, g)
			}
		}
	})
}
