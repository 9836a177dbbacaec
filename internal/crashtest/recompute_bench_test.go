//go:build unix

package crashtest

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// Shape of BenchmarkRestartRecompute's recovery log: rebuildRecords()
// records on rebuildShards shards, read back in ranges of rebuildPage()
// records; each block holds one range of every shard (a receiver reading
// them all in a block interval), and each pending batch rebuildBlocks
// blocks (a batch interval of block intervals).
const (
	rebuildShards = 4
	rebuildBlocks = 5
)

// rebuildRecords returns the records of BenchmarkRestartRecompute's log:
// 40,000, or 10,000 under -short (scripts/test's smoke run, which
// measures nothing).
func rebuildRecords() int { return shortOr(40000, 10000) }

// rebuildPage returns the records of a range of BenchmarkRestartRecompute's
// log: 500, or 250 under -short, so that the smaller log still holds two
// pending batches.
func rebuildPage() int { return shortOr(500, 250) }

// shortOr returns short under -short, full otherwise: the benchmarks'
// sizes in scripts/test's smoke run, which runs each once so that none
// rots.
func shortOr(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// BenchmarkRestartRecompute measures a restart that must rebuild the blocks
// of 4 shards: a recovery log whose pending batches hold every record of a
// 4-shard kinesalite stream, as a crash before their completion leaves it,
// is recovered by a pipeline with the Kinesis receiver, once sequentially
// (Parallelism 1, and each block's ranges read one after the other, as
// before goal 4 of issue 22: rangeByRange) and once as weir does (the
// default Parallelism, a block's shards read at once), in the same run. Reported: the seconds from Run
// to the last pending batch's output, for each (seq-s, par-s), and their
// ratio (par/seq). kinesalite answers on one thread, on the same cores as
// the pipeline, so the second sub-benchmark adds a round trip of
// rebuildRTT to every call, as a region's Kinesis endpoint has, which
// concurrent calls overlap. On Linux, seq-srv and par-srv are the CPU
// seconds the local servers used over those seconds: near 1, kinesalite's
// one thread was busy all along, and no concurrency on the client's side
// can make it answer sooner; floor/seq is the CPU time they take to serve
// the same records in the fewest calls (readAllCPU) over the sequential
// seconds: the least par/seq can be on bare kinesalite. seq-iters and
// par-iters count the GetShardIterator calls (the sequential path gets
// one per range; the concurrent one goes on from the iterator of a
// shard's range before while its next waits, see kinesis.Recompute).
// Run with -benchtime=1x -count=5 and take medians: the machine is shared.
func BenchmarkRestartRecompute(b *testing.B) {
	env := servers.Env(b)
	name := localaws.UniqueName(b) + strconv.Itoa(int(time.Now().UnixNano()%1e6))
	entries := rebuildLog(b, env, name)
	for _, rtt := range []time.Duration{0, rebuildRTT} {
		b.Run("rtt="+rtt.String(), func(b *testing.B) {
			for range b.N {
				// Which goes first alternates, across -count runs too: the
				// second reads a server the first has just warmed.
				var seq, par rebuilt
				if rebuildRuns++; rebuildRuns%2 == 1 {
					seq = rebuildOnce(b, env, name, entries, 1, true, rtt)
					par = rebuildOnce(b, env, name, entries, 0, false, rtt)
				} else {
					par = rebuildOnce(b, env, name, entries, 0, false, rtt)
					seq = rebuildOnce(b, env, name, entries, 1, true, rtt)
				}
				b.ReportMetric(seq.took.Seconds(), "seq-s")
				b.ReportMetric(par.took.Seconds(), "par-s")
				b.ReportMetric(par.took.Seconds()/seq.took.Seconds(), "par/seq")
				b.ReportMetric(float64(seq.iterators), "seq-iters")
				b.ReportMetric(float64(par.iterators), "par-iters")
				if seq.srv >= 0 && par.srv >= 0 {
					b.ReportMetric(seq.srv, "seq-srv")
					b.ReportMetric(par.srv, "par-srv")
				}
				if rtt == 0 {
					if floor, ok := readAllCPU(b, env, name); ok {
						b.ReportMetric(floor.Seconds()/seq.took.Seconds(), "floor/seq")
					}
				}
			}
		})
	}
}

// rebuildRuns counts BenchmarkRestartRecompute's pairs of runs, so that
// which of the two goes first alternates.
var rebuildRuns int

// readAllCPU reads every record of the stream in as few GetRecords calls as
// Kinesis allows (10,000 records each) and returns the CPU time the local
// servers spent meanwhile, and whether it is known (see serverCPU): with
// kinesalite answering on one thread, no recomputation of the same records
// can take less, so BenchmarkRestartRecompute reports it over the
// sequential time (floor/seq), the least par/seq can be on bare kinesalite.
func readAllCPU(b *testing.B, env *localaws.Env, name string) (time.Duration, bool) {
	client := env.Kinesis()
	shards := listShards(b, client, name)
	start, known := serverCPU()
	read := 0
	readPages(b, client, name, shards, 10000, func(_ int, page []types.Record) { read += len(page) })
	end, _ := serverCPU()
	if read != rebuildRecords() {
		b.Fatalf("read %d records, want %d", read, rebuildRecords())
	}
	return end - start, known
}

// listShards lists the stream's shards.
func listShards(b *testing.B, client *awskinesis.Client, name string) []types.Shard {
	shards, err := client.ListShards(b.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(name)})
	if err != nil {
		b.Fatal(err)
	}
	return shards.Shards
}

// readPages reads every shard from TRIM_HORIZON to its last record, limit
// records a GetRecords call, and hands each page to f with its shard's
// index.
func readPages(b *testing.B, client *awskinesis.Client, name string, shards []types.Shard, limit int32, f func(s int, page []types.Record)) {
	ctx := b.Context()
	for s, sh := range shards {
		it, err := client.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String(name),
			ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			b.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			res, err := client.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(limit)})
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Records) == 0 {
				break
			}
			f(s, res.Records)
			iter = res.NextShardIterator
		}
	}
}

// rebuildRTT is the round trip BenchmarkRestartRecompute's second part adds
// to every Kinesis call.
const rebuildRTT = 20 * time.Millisecond

// slowTrip holds every request for a round trip (if rtt > 0) before
// sending it, and counts the GetShardIterator calls.
type slowTrip struct {
	rtt       time.Duration
	base      http.RoundTripper
	iterators *atomic.Int64
}

func (s slowTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".GetShardIterator") {
		s.iterators.Add(1)
	}
	if s.rtt > 0 {
		t := time.NewTimer(s.rtt)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return s.base.RoundTrip(req)
}

// rebuildLog puts rebuildRecords() records on a new stream and returns the
// entries of a recovery log whose pending batches hold them all.
func rebuildLog(b *testing.B, env *localaws.Env, name string) []recoverylog.Entry {
	ctx := b.Context()
	if err := env.CreateStream(ctx, name, rebuildShards); err != nil {
		b.Fatal(err)
	}
	putNumbered(b, env, name, rebuildRecords())
	client := env.Kinesis()
	shards := listShards(b, client, name)
	// pages[s] are shard s's ranges, in order.
	pages := make([][]batch.SeqRange, len(shards))
	readPages(b, client, name, shards, int32(rebuildPage()), func(s int, page []types.Record) {
		pages[s] = append(pages[s], batch.SeqRange{Stream: name, Shard: aws.ToString(shards[s].ShardId),
			First: aws.ToString(page[0].SequenceNumber), Last: aws.ToString(page[len(page)-1].SequenceNumber),
			Count: len(page)})
	})
	var out []recoverylog.Entry
	var ids []batch.BlockID
	t := batch.Time(time.Now().Add(-time.Hour).UnixMilli() / 1000 * 1000)
	total := 0
	for seq := 0; ; seq++ {
		info := batch.BlockInfo{ID: batch.BlockID{Source: 0, Seq: uint64(seq)}}
		for s := range pages {
			if seq < len(pages[s]) {
				info.Ranges = append(info.Ranges, pages[s][seq])
				info.Count += pages[s][seq].Count
			}
		}
		if len(ids) > 0 && (len(info.Ranges) == 0 || len(ids) == rebuildBlocks) {
			out = append(out, recoverylog.BatchAllocated(t, ids...))
			t, ids = t.Add(time.Second), nil
		}
		if len(info.Ranges) == 0 {
			break
		}
		out = append(out, recoverylog.BlockStored(info))
		ids = append(ids, info.ID)
		total += info.Count
	}
	if total != rebuildRecords() {
		b.Fatalf("the blocks hold %d records, want %d", total, rebuildRecords())
	}
	return out
}

// rebuilt is what rebuildOnce measured.
type rebuilt struct {
	took      time.Duration // from Run to the last pending batch's output
	srv       float64       // the local servers' CPU time over took; -1: unknown (see serverCPU)
	iterators int64         // GetShardIterator calls, the readers' included
}

// rebuildOnce recovers a log holding entries with a pipeline of the given
// Parallelism (recomputing each block range by range if sequential), each
// Kinesis call delayed by rtt, and returns what it measured.
func rebuildOnce(b *testing.B, env *localaws.Env, name string, entries []recoverylog.Entry, parallelism int, sequential bool, rtt time.Duration) rebuilt {
	ctx := b.Context()
	quiet := slog.New(slog.DiscardHandler)
	store := recoverylog.NewMemory()
	l, err := recoverylog.Open(ctx, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Append(ctx, entries...); err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	awsCfg := env.AWSConfig()
	trip := slowTrip{rtt: rtt, base: http.DefaultTransport, iterators: new(atomic.Int64)}
	awsCfg.HTTPClient = &http.Client{Transport: trip}
	recv, err := kinesis.New(kinesis.Config{Stream: name, App: "rebuild", InitialPosition: kinesis.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: pollInterval, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: batchInterval, BlockInterval: blockInterval,
		Recovery: store, Parallelism: parallelism, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu      sync.Mutex
		seen    int
		last    time.Time
		lastCPU time.Duration
		done    = make(chan struct{})
	)
	var r source.Receiver[kinesis.Record] = recv
	if sequential {
		r = rangeByRange{recv}
	}
	stream.ForEachBatch(stream.From(p, r), func(_ context.Context, bt *batch.Batch[kinesis.Record]) error {
		mu.Lock()
		defer mu.Unlock()
		if seen += bt.Len(); seen == rebuildRecords() && bt.Len() > 0 {
			last = time.Now()
			lastCPU, _ = serverCPU()
			close(done)
		}
		return nil
	})
	startCPU, known := serverCPU()
	start := runUntil(b, p, done)
	mu.Lock()
	defer mu.Unlock()
	res := rebuilt{took: last.Sub(start), srv: -1, iterators: trip.iterators.Load()}
	if known {
		res.srv = (lastCPU - startCPU).Seconds() / res.took.Seconds()
	}
	return res
}

// rangeByRange is a Kinesis receiver that recomputes a block one range
// after the other: the sequential baseline of BenchmarkRestartRecompute.
type rangeByRange struct{ *kinesis.Receiver }

func (r rangeByRange) Recompute(ctx context.Context, info batch.BlockInfo) ([]kinesis.Record, error) {
	var out []kinesis.Record
	for _, rng := range info.Ranges {
		recs, err := r.Receiver.Recompute(ctx, batch.BlockInfo{ID: info.ID, Ranges: []batch.SeqRange{rng}, Count: rng.Count})
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}
