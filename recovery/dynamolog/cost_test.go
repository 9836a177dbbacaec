package dynamolog_test

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/recovery/dynamolog"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// logWrites are the DynamoDB operations that write the table.
var logWrites = []string{"PutItem", "BatchWriteItem", "UpdateItem", "DeleteItem", "TransactWriteItems"}

// BenchmarkLogCost runs a pipeline with a DynamoDB recovery log on
// dynalite, without state, with a MapWithState (whose keys time out), and
// idle with an UpdateStateByKey that keeps its keys for ever, moving its
// state in every empty batch (after one batch of records), idle (on a
// manual clock) and at 100 records a second (in real time, from
// the first compaction for the time of stream.DefaultCompactEvery batches,
// at least 10 s, so that the compactions are counted at their rate: the
// 1 s cases take about 3.5 minutes each), and reports the writes
// the log made, state snapshots included, counted at the HTTP transport
// (each request the server got), per worker-hour, with the puts by what
// they hold (putKinds). The records of a batch interval are pushed at once,
// to one shard: one block per batch. With -short (scripts/test's smoke
// run, which measures nothing) the idle cases run a little over one
// compaction's worth of batches and the real-time ones 2 s, with no
// compaction awaited.
//
//	go test -run '^$' -bench BenchmarkLogCost -benchtime 1x ./recovery/dynamolog/
func BenchmarkLogCost(b *testing.B) {
	env := localaws.ForTest(b, localaws.Options{DynamoDB: true})
	for _, kind := range []string{"stateless", "stateful", "keeping"} {
		for _, iv := range []time.Duration{200 * time.Millisecond, time.Second} {
			for _, rate := range []int{0, 100} {
				if kind == "keeping" && rate > 0 {
					continue // as stateful's: a block and a completion per batch
				}
				benchLogCost(b, env, kind, iv, rate)
			}
		}
	}
}

func benchLogCost(b *testing.B, env *localaws.Env, kind string, iv time.Duration, rate int) {
	state := "idle"
	if rate > 0 {
		state = strconv.Itoa(rate) + "rps"
	}
	b.Run(fmt.Sprintf("%s/batch=%v/%s", kind, iv, state), func(b *testing.B) {
		var perHour map[string]float64
		for range b.N {
			if rate == 0 {
				span := 10 * time.Minute
				switch {
				case testing.Short():
					// scripts/test runs every benchmark once with -short, so
					// that none rots: a little over one compaction's worth of
					// batches, not 10 minutes of them.
					span = (stream.DefaultCompactEvery + 10) * iv
				case kind == "keeping":
					span = time.Hour // its snapshots, one in 20 minutes, and a compaction
				}
				perHour = logCost(b, env, kind, iv, rate, span)
			} else {
				// After the first compaction, as long as the log takes
				// to compact once, so that the compactions are counted
				// at their rate.
				span := max(10*time.Second, stream.DefaultCompactEvery*iv)
				if testing.Short() {
					// scripts/test runs every benchmark once with -short, so
					// that none rots: 2 s, no compaction awaited.
					span = 2 * time.Second
				}
				perHour = logCostRealTime(b, env, kind, iv, rate, span)
			}
		}
		total := 0.0
		for _, op := range logWrites {
			total += perHour[op]
		}
		b.ReportMetric(total, "writes/worker-h")
		b.ReportMetric(perHour["PutItem"], "puts/worker-h")
		b.ReportMetric(perHour["BatchWriteItem"], "batchwrites/worker-h")
		for _, k := range putKinds {
			if perHour[k] > 0 {
				b.ReportMetric(perHour[k], k+"/worker-h")
			}
		}
	})
}

// putKinds are what the log's puts hold: an entry of a kind (its JSON
// "kind"), or an item of the log's own (a claim, the base item a
// compaction ends with).
var putKinds = []string{"block", "alloc", "complete", "reserved", "empty", "snapshot", "shape", "summary", "finished", "claim", "base", "chunk"}

// kindCounter is a dynamolog.Client that counts the puts by what they hold
// (putKinds).
type kindCounter struct {
	dynamolog.Client
	mu sync.Mutex
	n  map[string]int
}

func (c *kindCounter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	kind := "chunk" // a snapshot's
	if t, ok := in.Item["type"].(*types.AttributeValueMemberS); ok {
		kind = t.Value
	}
	if e, ok := in.Item["entry"].(*types.AttributeValueMemberS); ok {
		if _, rest, ok := strings.Cut(e.Value, `"kind":"`); ok {
			kind, _, _ = strings.Cut(rest, `"`)
		}
	}
	c.mu.Lock()
	c.n[kind]++
	c.mu.Unlock()
	return c.Client.PutItem(ctx, in, optFns...)
}

// counts returns the puts so far by kind.
func (c *kindCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// completions signals batches completed: those that find room in c, so
// that the Run, which drains when it is stopped, is never held up.
type completions struct {
	stream.NopListener
	c chan stream.BatchInfo
}

func (l completions) BatchCompleted(info stream.BatchInfo) {
	select {
	case l.c <- info:
	default:
	}
}

// startCost starts a pipeline of cfg on a memory source of 4 shards, with a
// DynamoDB recovery log whose requests go through the returned transport,
// which counts them, and, by kind, a MapWithState of the records, keyed
// by record, whose keys time out after 5 s ("stateful"), or an
// UpdateStateByKey that counts the batches since each key's first record
// and keeps its keys for ever ("keeping"). Cancel stops the Run, which
// then returns on runErr.
func startCost(b *testing.B, env *localaws.Env, kind string, cfg stream.Config) (tr *counted, src *memory.Source[string], runErr chan error, cancel func()) {
	ft, err := faults.New(faults.Config{})
	if err != nil {
		b.Fatal(err)
	}
	tr = &counted{Transport: ft, kinds: &kindCounter{Client: env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = ft }), n: map[string]int{}}}
	cfg.Recovery = dynamolog.Config{Client: tr.kinds, Table: table, Name: localaws.UniqueName(b)}
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		b.Fatal(err)
	}
	src, err = memory.New[string](memory.Config{Shards: 4})
	if err != nil {
		b.Fatal(err)
	}
	s := stream.From(p, src)
	stream.ForEachBatch(s, func(context.Context, *batch.Batch[string]) error { return nil })
	pairs := func() *stream.Stream[stream.Pair[string, int]] {
		return stream.Map(s, func(r string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: r, Value: 1} })
	}
	switch kind {
	case "keeping":
		ticks := stream.UpdateStateByKey(pairs(), func(_ string, _ []int, n int, _ bool) (int, bool) { return n + 1, true })
		stream.ForEachBatch(ticks, func(context.Context, *batch.Batch[stream.Pair[string, int]]) error { return nil })
	case "stateful":
		counts, _ := stream.MapWithState(pairs(), func(_ string, v int, st *stream.State[int]) (int, bool) {
			if !st.IsTimingOut() {
				st.Update(st.Get() + v)
			}
			return st.Get(), true
		}, stream.StateTimeout(5*time.Second))
		stream.ForEachBatch(counts, func(context.Context, *batch.Batch[int]) error { return nil })
	}
	ctx, cancel := context.WithCancel(b.Context())
	runErr = make(chan error, 1)
	go func() { runErr <- p.Run(ctx) }()
	return tr, src, runErr, cancel
}

// logCost runs the pipeline for span of virtual time after a warm-up of a
// few batches, rate records a second pushed at the start of each batch
// interval (and for "keeping" 10 records in the first batch), and returns
// the log's writes per operation scaled to an hour.
func logCost(b *testing.B, env *localaws.Env, kind string, iv time.Duration, rate int, span time.Duration) map[string]float64 {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	done := completions{c: make(chan stream.BatchInfo, 1)}
	tr, src, runErr, cancel := startCost(b, env, kind, stream.Config{BatchInterval: iv, Clock: clk, Listeners: []stream.Listener{done}})
	defer cancel()
	ctx := b.Context()
	if err := clk.WaitForWaiters(ctx, 2); err != nil { // the batch timer, the block generator
		b.Fatal(err)
	}
	perBatch := rate * int(iv/time.Millisecond) / 1000
	records := make([]string, perBatch)
	for i := range records {
		records[i] = "record-" + strconv.Itoa(i)
	}
	// step pushes a batch's records and moves the clock on in halves of a
	// batch interval until a batch completes: a timer re-armed just after
	// an Advance is armed from the new time, so one Advance of a whole
	// interval could pass it by and wait for ever.
	step := func() {
		if perBatch > 0 {
			if err := src.Push(records...); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(time.Minute)
		for {
			select {
			case info := <-done.c:
				if info.Err != nil {
					b.Fatal(info.Err)
				}
				return
			case err := <-runErr:
				b.Fatalf("Run returned early: %v", err)
			case <-time.After(time.Millisecond):
				if time.Now().After(deadline) {
					b.Fatalf("no batch completed within a minute of real time (clock at %v)", clk.Now())
				}
				clk.Advance(iv / 2)
			}
		}
	}
	if kind == "keeping" {
		if err := src.Push("k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"); err != nil {
			b.Fatal(err)
		}
	}
	for range 5 {
		step()
	}
	before := logRequests(tr)
	start := clk.Now()
	for clk.Now().Sub(start) < span {
		step()
	}
	took := clk.Now().Sub(start)
	return stopCost(b, tr, before, took, cancel, runErr, func() { clk.Advance(iv) })
}

// logCostRealTime runs the pipeline on the real clock for span after a
// warm-up of a second, rate records a second pushed every batch interval,
// and returns the log's writes per operation scaled to an hour.
func logCostRealTime(b *testing.B, env *localaws.Env, kind string, iv time.Duration, rate int, span time.Duration) map[string]float64 {
	tr, src, runErr, cancel := startCost(b, env, kind, stream.Config{BatchInterval: iv})
	defer cancel()
	records := make([]string, rate*int(iv/time.Millisecond)/1000)
	for i := range records {
		records[i] = "record-" + strconv.Itoa(i)
	}
	tick := time.NewTicker(iv)
	defer tick.Stop()
	push := func(d time.Duration, until func() bool) {
		for end := time.Now().Add(d); time.Now().Before(end) && !until(); {
			select {
			case <-tick.C:
				if err := src.Push(records...); err != nil {
					b.Fatal(err)
				}
			case err := <-runErr:
				b.Fatalf("Run returned early: %v", err)
			}
		}
	}
	// Warm up until the first compaction, so that the span, as long as the
	// log takes to compact once, holds one in the steady state. Under
	// -short (see benchLogCost) no compaction is awaited: the 2 s span
	// holds none, and its 200ms and 1s batches would not compact within
	// the 6 s this warm-up allows.
	if !testing.Short() {
		push(3*span, func() bool { return tr.kinds.counts()["base"] > 0 })
	}
	before := logRequests(tr)
	start := time.Now()
	push(span, func() bool { return false })
	took := time.Since(start)
	return stopCost(b, tr, before, took, cancel, runErr, nil)
}

// counted counts the requests a log makes, at the transport, and its puts
// by kind.
type counted struct {
	*faults.Transport
	kinds *kindCounter
}

// logRequests returns the log's write requests so far, by operation, and
// its puts by kind.
func logRequests(tr *counted) map[string]int {
	n := tr.kinds.counts()
	for _, op := range logWrites {
		n[op] = tr.Requests(op)
	}
	return n
}

// stopCost stops the pipeline and returns its log's writes per operation
// since before, over took, scaled to an hour. advance, if not nil, moves a
// manual clock on while the Run stops: it drains, on that clock.
func stopCost(b *testing.B, tr *counted, before map[string]int, took time.Duration, cancel func(), runErr chan error, advance func()) map[string]float64 {
	perHour := map[string]float64{}
	for op, n := range logRequests(tr) {
		perHour[op] = float64(n-before[op]) * float64(time.Hour) / float64(took)
	}
	cancel()
	// A few intervals are enough for the drain's last batch; more would
	// pass its timeout while the Run compacts its log at its end, in real
	// time.
	for advanced := 0; ; {
		select {
		case err := <-runErr:
			if err != nil {
				b.Fatal(err)
			}
			return perHour
		case <-time.After(time.Millisecond):
			if advance != nil && advanced < 3 {
				advance()
				advanced++
			}
		}
	}
}
