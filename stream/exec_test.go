package stream

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
)

// shardRec is a record of the order tests: the index of the shard it was
// pushed to and its sequence number in that shard.
type shardRec struct {
	Shard, Seq int
}

// runMemory runs p, in a synctest bubble, with src as a source: it pushes
// n records R{i % shards, i / shards} (R a shardRec, or a posRec for
// records that know their position), one Push each, so that record i goes
// to shard i % shards (the memory source deals Push calls round-robin),
// sleeping now and then so that the records spread over several blocks and
// batches; then it drains p and returns what Run returned.
func runMemory[R ~struct{ Shard, Seq int }](t *testing.T, p *Pipeline, src *memory.Source[R], shards, n int) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(t.Context()) }()
	for i := range n {
		if err := src.Push(R{i % shards, i / shards}); err != nil {
			t.Fatalf("Push: %v", err)
		}
		if i%37 == 0 {
			time.Sleep(7 * time.Millisecond)
		}
	}
	if err := p.Drain(context.Background()); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	return <-errc
}

func newMemoryPipeline(t *testing.T, cfg Config, shards int) (*Pipeline, *memory.Source[shardRec]) {
	t.Helper()
	return newMemoryPipelineOf[shardRec](t, cfg, shards)
}

// newMemoryPipelineOf is newMemoryPipeline for records of type R.
func newMemoryPipelineOf[R any](t *testing.T, cfg Config, shards int) (*Pipeline, *memory.Source[R]) {
	t.Helper()
	p, err := NewPipeline(cfg)
	if err != nil {
		t.Fatalf("NewPipeline: %v", err)
	}
	src, err := memory.New[R](memory.Config{Shards: shards})
	if err != nil {
		t.Fatalf("memory.New: %v", err)
	}
	return p, src
}

// TestShardOrderThroughNarrowOperators checks that, with Parallelism > 1,
// the records of each shard go through Map, Filter and FlatMap to ForEach
// and ForEachPartition in the order they were pushed, with nothing lost or
// repeated, and that a partition holds the records of the shard it names.
func TestShardOrderThroughNarrowOperators(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n = 4, 2000
		p, src := newMemoryPipeline(t, Config{Parallelism: 4, BatchInterval: 50 * time.Millisecond, BlockInterval: 10 * time.Millisecond}, shards)
		recs := From(p, src)
		// Each output gets its own chain, so each runs fused in the output's
		// tasks.
		chain := func() *Stream[shardRec] {
			m := Map(recs, func(r shardRec) shardRec { r.Seq *= 10; return r })
			f := Filter(m, func(r shardRec) bool { return r.Seq%20 == 0 })
			return FlatMap(f, func(r shardRec) []shardRec { return []shardRec{r, {r.Shard, r.Seq + 1}} })
		}
		var mu sync.Mutex
		each := make([][]int, shards)
		ForEach(chain(), func(_ context.Context, r shardRec) error {
			mu.Lock()
			defer mu.Unlock()
			each[r.Shard] = append(each[r.Shard], r.Seq)
			return nil
		})
		byPart := make([][]int, shards)
		var wrongShard []string
		batches := 0
		ForEachPartition(chain(), func(_ context.Context, pt Partition[shardRec]) error {
			mu.Lock()
			defer mu.Unlock()
			for r := range pt.All() {
				if want := memory.ShardName(r.Shard); pt.Shard != want {
					wrongShard = append(wrongShard, fmt.Sprintf("record %v in partition %d of shard %q", r, pt.Index, pt.Shard))
				}
				byPart[r.Shard] = append(byPart[r.Shard], r.Seq)
			}
			return nil
		})
		ForEachBatch(recs, func(context.Context, *batch.Batch[shardRec]) error { batches++; return nil })
		if err := runMemory(t, p, src, shards, n); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if batches < 5 {
			t.Errorf("the records came in %d batches; the test wants several", batches)
		}
		var want []int
		for seq := range n / shards {
			if seq%2 == 0 {
				want = append(want, seq*10, seq*10+1)
			}
		}
		for s := range shards {
			if diff := cmp.Diff(want, each[s]); diff != "" {
				t.Errorf("ForEach, shard %d (-want +got):\n%s", s, diff)
			}
			if diff := cmp.Diff(want, byPart[s]); diff != "" {
				t.Errorf("ForEachPartition, shard %d (-want +got):\n%s", s, diff)
			}
		}
		if len(wrongShard) > 0 {
			t.Errorf("records in the wrong partition: %v", wrongShard)
		}
	})
}

// TestForEachRunsPartitionsConcurrently checks that ForEach runs the
// partitions of a batch at the same time: the record of each shard waits
// for the other's, which only works if both calls run at once.
func TestForEachRunsPartitionsConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := newMemoryPipeline(t, Config{Parallelism: 2}, 2)
		arrived := []chan struct{}{make(chan struct{}), make(chan struct{})}
		var alone atomic.Int32
		ForEach(From(p, src), func(_ context.Context, r shardRec) error {
			close(arrived[r.Shard])
			select {
			case <-arrived[1-r.Shard]:
			case <-time.After(time.Minute): // virtual time: at once if the other never comes
				alone.Add(1)
			}
			return nil
		})
		if err := runMemory(t, p, src, 2, 2); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if n := alone.Load(); n > 0 {
			t.Errorf("%d partitions ran alone; want both at once", n)
		}
	})
}

// TestPanicFailsBatch checks that a panic in a user function fails its
// batch with a *BatchError holding the panic value and the stack, and
// stops the pipeline, whatever the function: an operator's, fused in a
// task, or an output's.
func TestPanicFailsBatch(t *testing.T) {
	boom := func(v string) {
		if v == "boom" {
			panic("kaboom")
		}
	}
	tests := []struct {
		name  string
		build func(s *Stream[string])
		want  string // the operator or output the error names
	}{
		{"Map", func(s *Stream[string]) {
			collect(Map(s, func(v string) string { boom(v); return v }))
		}, "ForEachBatch of Map (stream 1)"},
		{"shared Map", func(s *Stream[string]) {
			m := Map(s, func(v string) string { boom(v); return v })
			ForEach(m, func(context.Context, string) error { return nil })
			ForEachPartition(m, func(context.Context, Partition[string]) error { return nil })
		}, "ForEach of Map (stream 1)"},
		{"Filter", func(s *Stream[string]) {
			ForEach(Filter(s, func(v string) bool { boom(v); return true }), func(context.Context, string) error { return nil })
		}, "ForEach of Filter (stream 1)"},
		{"FlatMap", func(s *Stream[string]) {
			ForEachPartition(FlatMap(s, func(v string) []string { boom(v); return nil }), func(context.Context, Partition[string]) error { return nil })
		}, "ForEachPartition of FlatMap (stream 1)"},
		{"ForEach", func(s *Stream[string]) {
			ForEach(s, func(_ context.Context, v string) error { boom(v); return nil })
		}, "ForEach of From(source 0) (stream 0)"},
		{"ForEachBatch", func(s *Stream[string]) {
			ForEachBatch(s, func(_ context.Context, b *batch.Batch[string]) error {
				for v := range b.All() {
					boom(v)
				}
				return nil
			})
		}, "ForEachBatch of From(source 0) (stream 0)"},
		{"reducer", func(s *Stream[string]) {
			pairs := Map(s, func(v string) kv { return kv{v, 1} })
			collect(ReduceByKey(pairs, func(a, b int) int { panic("kaboom") }))
		}, "ForEachBatch of ReduceByKey (stream 2)"},
		{"UpdateStateByKey", func(s *Stream[string]) {
			pairs := Map(s, func(v string) kv { return kv{v, 1} })
			collect(UpdateStateByKey(pairs, func(k string, _ []int, st int, _ bool) (int, bool) { boom(k); return st, true }))
		}, "UpdateStateByKey (stream 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				p, r, s := newTest[string](t, Config{Parallelism: 2})
				tt.build(s)
				err := feed(t, p, r, [][]string{{"a"}, {"boom", "boom"}})
				be, ok := errors.AsType[*BatchError](err)
				if !ok {
					t.Fatalf("Run = %v, want a *BatchError", err)
				}
				if be.Panic != "kaboom" {
					t.Errorf("BatchError.Panic = %#v, want %q", be.Panic, "kaboom")
				}
				if !strings.Contains(string(be.Stack), "TestPanicFailsBatch") {
					t.Errorf("BatchError.Stack does not show the panicking function:\n%s", be.Stack)
				}
				if want := batch.TimeOf(time.Unix(946684802, 0)); be.Time != want {
					t.Errorf("BatchError.Time = %v, want %v (the second batch)", be.Time, want)
				}
				// A failure of the output's function or of a narrow
				// operator's, shared or not, ends with the fix
				// (Quarantine); one of a keyed or state operator cannot be
				// quarantined, and names its fix when it failed before the
				// operator grouped the records; a state operator's function
				// names the key and the fix.
				suffix := "panic: kaboom"
				if own := map[string]bool{"Map": true, "shared Map": true, "Filter": true, "FlatMap": true, "ForEach": true, "ForEachBatch": true}; own[tt.name] {
					suffix = "panic: kaboom (" + stopFix + ")"
				}
				switch tt.name {
				case "reducer": // in the map side: the records and the fix are named
					suffix = keyedStopFix
				case "UpdateStateByKey":
					suffix = `panic: kaboom; on key "boom": ` + updateFix(true)
				}
				if msg := err.Error(); !strings.Contains(msg, tt.want) || !strings.HasSuffix(msg, suffix) {
					t.Errorf("Run = %q, want it to name %s and end with %q", msg, tt.want, suffix)
				}
				if diff := cmp.Diff([][]batch.BlockID{{{Source: 0, Seq: 0}}}, r.completed); diff != "" {
					t.Errorf("completed blocks (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestPanicInReduceTask checks a panic on the reduce side of a shuffle,
// where the values of a key from two partitions meet.
func TestPanicInReduceTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := newMemoryPipeline(t, Config{Parallelism: 2}, 2)
		pairs := Map(From(p, src), func(r shardRec) Pair[int, int] { return Pair[int, int]{r.Seq, r.Shard} })
		ForEach(ReduceByKey(pairs, func(a, b int) int {
			if a != b {
				panic(fmt.Sprintf("shards %d and %d", a, b))
			}
			return a
		}), func(context.Context, Pair[int, int]) error { return nil })
		err := runMemory(t, p, src, 2, 2)
		if be, ok := errors.AsType[*BatchError](err); !ok || be.Panic != "shards 0 and 1" || len(be.Stack) == 0 {
			t.Fatalf("Run = %v, want a *BatchError for the panic of the reducer", err)
		}
	})
}

// TestKeyedOrder checks that ReduceByKey and CountByValue give the pairs
// in the order keys first appear in the batch, whatever the parallelism,
// from partitions of several shards.
func TestKeyedOrder(t *testing.T) {
	for _, par := range []int{1, 2, 3, 7} {
		t.Run(fmt.Sprintf("Parallelism %d", par), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, src := newMemoryPipeline(t, Config{Parallelism: par, BatchInterval: 100 * time.Millisecond, BlockInterval: 10 * time.Millisecond}, 3)
				recs := From(p, src)
				key := func(r shardRec) int { return (r.Seq*7 + r.Shard*3) % 50 }
				var want, gotReduce, gotCount [][]Pair[int, int64]
				ForEachBatch(recs, func(_ context.Context, b *batch.Batch[shardRec]) error {
					index := make(map[int]int)
					var out []Pair[int, int64]
					for r := range b.All() {
						k := key(r)
						if i, ok := index[k]; ok {
							out[i].Value++
							continue
						}
						index[k] = len(out)
						out = append(out, Pair[int, int64]{k, 1})
					}
					want = append(want, out)
					return nil
				})
				pairs := Map(recs, func(r shardRec) Pair[int, int64] { return Pair[int, int64]{key(r), 1} })
				ForEachBatch(ReduceByKey(pairs, func(a, b int64) int64 { return a + b }), func(_ context.Context, b *batch.Batch[Pair[int, int64]]) error {
					gotReduce = append(gotReduce, b.Records())
					return nil
				})
				ForEachBatch(CountByValue(Map(recs, key)), func(_ context.Context, b *batch.Batch[Pair[int, int64]]) error {
					gotCount = append(gotCount, b.Records())
					return nil
				})
				if err := runMemory(t, p, src, 3, 3000); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if diff := cmp.Diff(want, gotReduce); diff != "" {
					t.Errorf("ReduceByKey (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(want, gotCount); diff != "" {
					t.Errorf("CountByValue (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestShardParts(t *testing.T) {
	rg := func(shard string, n int) batch.SeqRange {
		return batch.SeqRange{Stream: "s", Shard: shard, First: "1", Last: "1", Count: n}
	}
	blocks := []batch.BlockInfo{
		{Ranges: []batch.SeqRange{rg("a", 2), rg("b", 1), rg("a", 1), rg("a", 1)}},
		{Ranges: []batch.SeqRange{rg("b", 2)}},
		{},                                     // no ranges: a partition of its own
		{Ranges: []batch.SeqRange{rg("c", 5)}}, // ranges that do not match: the same
		{Ranges: []batch.SeqRange{rg("a", 1)}}, // no records: no partition
	}
	recs := [][]string{{"a1", "a2", "b1", "a3", "a4"}, {"b2", "b3"}, {"x", "y"}, {"c1"}, nil}
	keys, npos, data := shardParts(blocks, recs)
	wantKeys := []partKey{{"s", "a"}, {"s", "b"}, {}, {}}
	if diff := cmp.Diff(wantKeys, keys, cmp.AllowUnexported(partKey{})); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	// Positions: a1-a2 0, b1 1, a3-a4 2, b2-b3 3, x-y 4, c1 5.
	wantData := [][]chunk[string]{
		{{0, []string{"a1", "a2"}}, {2, []string{"a3", "a4"}}},
		{{1, []string{"b1"}}, {3, []string{"b2", "b3"}}},
		{{4, []string{"x", "y"}}},
		{{5, []string{"c1"}}},
	}
	if diff := cmp.Diff(wantData, data, cmp.AllowUnexported(chunk[string]{})); diff != "" || npos != 6 {
		t.Errorf("partitions, %d positions (-want +got):\n%s", npos, diff)
	}
	pt := computed(batch.Time(0), blocks, keys, npos, data)
	if diff := cmp.Diff([]string{"a1", "a2", "b1", "a3", "a4", "b2", "b3", "x", "y", "c1"}, pt.batch().Records()); diff != "" {
		t.Errorf("batch of the partitions, in block order (-want +got):\n%s", diff)
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		parts [][]int
		n     int
		want  [][]int
	}{
		{[][]int{{1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10}}, 3, [][]int{{1, 2, 3, 4}, {5, 6, 7}, {8, 9, 10}}},
		{[][]int{{1, 2}}, 4, [][]int{{1}, {2}}},
		{nil, 4, [][]int{}},
		{[][]int{{1, 2, 3}}, 1, [][]int{{1, 2, 3}}},
	}
	for _, tt := range tests {
		b := batch.New(batch.Time(1000), nil, tt.parts...)
		pt := split(b, tt.n)
		got := [][]int{}
		for i := range pt.keys {
			var recs []int
			pt.each(i, func(_ int, c []int) bool { recs = append(recs, c...); return true })
			got = append(got, recs)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("split(%v, %d) (-want +got):\n%s", tt.parts, tt.n, diff)
		}
		if pt.batch() != b {
			t.Errorf("split(%v, %d).batch() is not the batch split", tt.parts, tt.n)
		}
	}
}

// TestParallel checks the task runner: at most par tasks at once, all of
// them when they can, errors and panics returned, a done ctx honoured.
func TestParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, par := range []int{1, 2, 5} {
			var running, most atomic.Int32
			var ran []int
			var mu sync.Mutex
			err := parallel(t.Context(), par, 12, func(_ context.Context, i int) error {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				running.Add(-1)
				mu.Lock()
				ran = append(ran, i)
				mu.Unlock()
				return nil
			})
			slices.Sort(ran)
			if err != nil || len(ran) != 12 || ran[11] != 11 || int(most.Load()) != par {
				t.Errorf("par %d: err %v, ran %v, at most %d at once; want nil, 0..11, %d", par, err, ran, most.Load(), par)
			}
		}

		boom := errors.New("boom")
		err := parallel(t.Context(), 3, 10, func(_ context.Context, i int) error {
			if i == 4 {
				return boom
			}
			return nil
		})
		if err != boom {
			t.Errorf("a task's error: parallel = %v, want %v", err, boom)
		}

		err = parallel(t.Context(), 3, 10, func(_ context.Context, i int) error {
			if i == 6 {
				panic(i)
			}
			return nil
		})
		if pe, ok := errors.AsType[*panicError](err); !ok || pe.Value != 6 || !strings.Contains(string(pe.Stack), "TestParallel") {
			t.Errorf("a task's panic: parallel = %v, want a *panicError of 6 with the stack", err)
		}

		ctx, cancel := context.WithCancelCause(t.Context())
		stop := errors.New("stopped")
		cancel(stop)
		for _, par := range []int{1, 3} {
			if err := parallel(ctx, par, 4, func(context.Context, int) error { return nil }); err != stop {
				t.Errorf("par %d, ctx done: parallel = %v, want its cause", par, err)
			}
		}
	})
}

// TestBatchAndOutputOrder checks, with Parallelism > 1, that batches run
// in batch-time order, that the outputs of a batch run one after the other
// in declaration order, each done before the next starts, and that
// ForEachBatch sees the whole batch: every record ForEach saw in it.
func TestBatchAndOutputOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := newMemoryPipeline(t, Config{Parallelism: 3, BatchInterval: 20 * time.Millisecond, BlockInterval: 5 * time.Millisecond}, 3)
		recs := From(p, src)
		type event struct {
			time   batch.Time
			output int
			n      int // records seen
		}
		var mu sync.Mutex
		var events []event
		add := func(tm batch.Time, output, n int) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, event{tm, output, n})
		}
		// ForEach does not know its batch's time: the next output's event
		// closes the group.
		ForEach(recs, func(context.Context, shardRec) error { add(0, 0, 1); return nil })
		ForEachPartition(recs, func(_ context.Context, pt Partition[shardRec]) error { add(pt.Time, 1, pt.Len()); return nil })
		ForEachBatch(recs, func(_ context.Context, b *batch.Batch[shardRec]) error { add(b.Time(), 2, b.Len()); return nil })
		if err := runMemory(t, p, src, 3, 900); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// ForEachBatch runs once per batch, empty ones included, last: its
		// event closes the batch's group.
		var last batch.Time
		var count [3]int
		output, total, batches := 0, 0, 0
		for i, ev := range events {
			if ev.output < output {
				t.Fatalf("event %d: output %d ran after output %d of the same batch", i, ev.output, output)
			}
			if ev.output == 1 && events[i-1].output == 1 && ev.time != events[i-1].time {
				t.Fatalf("event %d: batch %v among the partitions of batch %v", i, ev.time, events[i-1].time)
			}
			output = ev.output
			count[ev.output] += ev.n
			if ev.output != 2 {
				continue
			}
			if i > 0 && events[i-1].output == 1 && events[i-1].time != ev.time {
				t.Fatalf("event %d: batch %v after the partitions of batch %v", i, ev.time, events[i-1].time)
			}
			if ev.time <= last {
				t.Errorf("batch %v ran after batch %v", ev.time, last)
			}
			if count[0] != count[1] || count[0] != count[2] {
				t.Errorf("batch %v: ForEach saw %d records, ForEachPartition %d, ForEachBatch %d; want the same", ev.time, count[0], count[1], count[2])
			}
			last, total, batches = ev.time, total+count[2], batches+1
			count, output = [3]int{}, 0
		}
		if total != 900 || batches < 5 {
			t.Errorf("%d records in %d batches; want 900 in several", total, batches)
		}
	})
}

// TestSharedNarrowStreamComputedOnce checks that a narrow stream that two
// outputs and an operator consume is computed once per batch, its
// partitions in parallel, while each consumer's own chain runs fused.
func TestSharedNarrowStreamComputedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := newMemoryPipeline(t, Config{Parallelism: 2, BatchInterval: 20 * time.Millisecond, BlockInterval: 5 * time.Millisecond}, 3)
		var shared, fused atomic.Int64
		m := Map(From(p, src), func(r shardRec) shardRec { shared.Add(1); return r })
		var seen atomic.Int64
		ForEach(m, func(context.Context, shardRec) error { seen.Add(1); return nil })
		ForEachPartition(Map(m, func(r shardRec) int { fused.Add(1); return r.Seq }), func(_ context.Context, pt Partition[int]) error {
			seen.Add(int64(pt.Len()))
			return nil
		})
		ForEachBatch(m, func(_ context.Context, b *batch.Batch[shardRec]) error { seen.Add(int64(b.Len())); return nil })
		if err := runMemory(t, p, src, 3, 600); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if shared.Load() != 600 || fused.Load() != 600 || seen.Load() != 3*600 {
			t.Errorf("shared map called %d times, fused map %d, outputs saw %d records; want 600, 600, %d", shared.Load(), fused.Load(), seen.Load(), 3*600)
		}
	})
}

// TestGoexitFailsRun checks that a user function that calls
// runtime.Goexit, in a task or in the batch runner's goroutine, fails the
// Run instead of passing for done or leaving the pipeline stuck.
func TestGoexitFailsRun(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("Parallelism %d", par), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, src := newMemoryPipeline(t, Config{Parallelism: par}, 2)
				ForEach(From(p, src), func(_ context.Context, r shardRec) error {
					if r.Seq == 3 {
						runtime.Goexit()
					}
					return nil
				})
				errc := make(chan error, 1)
				go func() { errc <- p.Run(t.Context()) }()
				for i := range 10 {
					if err := src.Push(shardRec{i % 2, i / 2}); err != nil {
						t.Fatal(err)
					}
				}
				if err := <-errc; !errors.Is(err, errTaskExited) {
					t.Errorf("Run = %v, want %v", err, errTaskExited)
				}
			})
		})
	}
}

// BenchmarkParallelStart measures what starting a stage of two tasks costs
// a batch: the time from a call of parallel to the start of the task that
// the calling goroutine leaves to a helper, after the CPUs were idle for a
// millisecond, as between the batches of a Run (the calling goroutine's
// own task waits for it, so that a helper does run it). It reports the
// median and the 90th percentile, in microseconds:
//
//	go test -run '^$' -bench ParallelStart ./stream
//
// On a virtual machine an idle CPU takes 0.1-0.2 ms to wake, on the
// machine this was written on; a small batch pays it at each stage (the map
// and reduce sides of a shuffle), which is why BenchmarkWordCountPaired and
// BenchmarkKeyedPaired also run a batch ten times larger.
func BenchmarkParallelStart(b *testing.B) {
	ctx := b.Context()
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		time.Sleep(time.Millisecond)
		b.StartTimer()
		var started atomic.Bool
		var at time.Duration
		start := time.Now()
		err := parallel(ctx, 2, 2, func(_ context.Context, i int) error {
			if i == 1 {
				at = time.Since(start)
				started.Store(true)
				return nil
			}
			// Busy, as a task computing: not yielding, so that the
			// helper must start on the other CPU.
			for !started.Load() && time.Since(start) < 10*time.Millisecond {
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, at)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e3, "start-µs")
	b.ReportMetric(float64(took[len(took)*9/10])/1e3, "p90-start-µs")
}
