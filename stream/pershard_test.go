package stream_test

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/stream"
)

// shardedSource is a receiver sharing its shards, as a Kinesis receiver
// with leases does, whose test pushes blocks of named shards by hand and
// gets the driver's source.ShardState.
type shardedSource struct {
	states chan source.ShardState
	push   chan shardPush
	stop   chan struct{}
	once   sync.Once
}

type shardPush struct {
	shard string
	first int // sequence number of the first record
	keys  []string
	done  chan error
}

func newShardedSource() *shardedSource {
	return &shardedSource{states: make(chan source.ShardState, 1), push: make(chan shardPush), stop: make(chan struct{})}
}

func (s *shardedSource) SharesShards() bool { return true }

func (s *shardedSource) Start(ctx context.Context, rt source.Runtime[string]) error {
	s.states <- rt.ShardState
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stop:
			return nil
		case p := <-s.push:
			last := strconv.Itoa(p.first + len(p.keys) - 1)
			_, err := rt.Push(ctx, source.Block[string]{Records: p.keys,
				Ranges: []batch.SeqRange{{Stream: "s", Shard: p.shard, First: strconv.Itoa(p.first), Last: last, Count: len(p.keys)}}})
			p.done <- err
		}
	}
}

func (s *shardedSource) Stop(context.Context) error {
	s.once.Do(func() { close(s.stop) })
	return nil
}

func (s *shardedSource) Recompute(context.Context, batch.BlockInfo) ([]string, error) {
	return nil, errors.New("no recompute")
}

// Halves of the hash key space: shard "lo" and shard "hi".
var (
	loShard = source.Shard{Stream: "s", ID: "lo", StartingHashKey: "0", EndingHashKey: "170141183460469231731687303715884105727"}
	hiShard = source.Shard{Stream: "s", ID: "hi", StartingHashKey: "170141183460469231731687303715884105728", EndingHashKey: "340282366920938463463374607431768211455"}
)

// keyIn returns a key whose MD5 falls in the lower half (lo) or the upper
// half of the hash key space: the first digit of its hex MD5 is below 8.
func keyIn(t *testing.T, lo bool) string {
	t.Helper()
	for i := range 100 {
		k := fmt.Sprintf("key%d", i)
		if md5High(k) == !lo {
			return k
		}
	}
	t.Fatal("no key found")
	return ""
}

// A keyed count declared PartitionedBy on a source sharing its shards
// keeps the state of the loaded shards' keys only: a record of a shard not
// loaded gets no state; Snapshot gives a shard's keys and the position of
// its last completed record; Drop forgets them; Load puts them back,
// restricted to the shard loaded.
func TestStatePerShard(t *testing.T) {
	r := startSharded(t, func(_ *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
		return stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
	})
	ctx, ss := r.ctx, r.ss
	lo, hi := keyIn(t, true), keyIn(t, false)
	if err := ss.Load(ctx, loShard); err != nil {
		t.Fatal(err)
	}
	r.push("lo", 1, lo, lo, lo)
	r.push("hi", 1, hi, hi) // hi is not loaded: its key gets no state
	r.waitFor("lo counted, hi left out", map[string]int{lo: 3})

	data, upTo, err := ss.Snapshot(ctx, loShard)
	if err != nil || upTo != "3" {
		t.Fatalf("Snapshot(lo) = %d bytes, upTo %q, %v; want upTo 3", len(data), upTo, err)
	}
	if err := ss.Drop(ctx, loShard); err != nil {
		t.Fatal(err)
	}
	r.waitFor("lo dropped", map[string]int{})
	// Loaded into the other half, lo's key is outside it: left out.
	if err := ss.Load(ctx, hiShard, data); err != nil {
		t.Fatal(err)
	}
	r.push("hi", 3, hi)
	r.waitFor("hi counted from its load, lo's key not loaded into hi", map[string]int{hi: 1})
	if err := ss.Load(ctx, loShard, data); err != nil {
		t.Fatal(err)
	}
	r.push("lo", 4, lo)
	r.waitFor("lo counted on top of its snapshot", map[string]int{hi: 1, lo: 4})
	if _, upTo, _ := ss.Snapshot(ctx, loShard); upTo != "4" {
		t.Errorf("Snapshot(lo) after a record at 4: upTo %q, want 4", upTo)
	}
	if _, upTo, _ := ss.Snapshot(ctx, hiShard); upTo != "3" {
		t.Errorf("Snapshot(hi): upTo %q, want 3", upTo)
	}
	r.drain()
}

// shardedRun is a pipeline running on a shardedSource: records keyed by
// themselves, declared PartitionedBy, counted by the operator under test,
// each batch's counts sent on batches.
type shardedRun struct {
	t       *testing.T
	p       *stream.Pipeline
	src     *shardedSource
	ss      source.ShardState
	ctx     context.Context
	batches chan map[string]int
	done    chan error
}

// startSharded runs the pipeline count builds and waits for its ShardState.
func startSharded(t *testing.T, count func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]]) *shardedRun {
	t.Helper()
	return startShardedBy(t, func(k string) string { return k }, count)
}

// startShardedBy is startSharded with the partition key function pk.
func startShardedBy(t *testing.T, pk func(string) string, count func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]]) *shardedRun {
	t.Helper()
	r := &shardedRun{t: t, src: newShardedSource(), batches: make(chan map[string]int, 1000), done: make(chan error, 1)}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	pairs := stream.Map(stream.From(p, r.src), func(k string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: k, Value: 1} })
	stream.ForEachBatch(count(p, stream.PartitionedBy(pairs, pk)),
		func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
			m := map[string]int{}
			for kv := range b.All() {
				m[kv.Key] = kv.Value
			}
			r.batches <- m
			return nil
		})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	r.ctx = ctx
	go func() { r.done <- p.Run(ctx) }()
	if r.ss = <-r.src.states; r.ss == nil {
		t.Fatal("Runtime.ShardState is nil for a count declared PartitionedBy on a source sharing its shards")
	}
	return r
}

// push pushes a block of keys read from shard, from sequence number first.
func (r *shardedRun) push(shard string, first int, keys ...string) {
	r.t.Helper()
	d := make(chan error, 1)
	r.src.push <- shardPush{shard: shard, first: first, keys: keys, done: d}
	if err := <-d; err != nil {
		r.t.Fatal(err)
	}
}

// waitFor waits for a batch whose counts are want.
func (r *shardedRun) waitFor(what string, want map[string]int) {
	r.t.Helper()
	for {
		select {
		case m := <-r.batches:
			if fmt.Sprint(m) == fmt.Sprint(want) {
				return
			}
		case <-r.ctx.Done():
			r.t.Fatalf("no batch with counts %v: %s", want, what)
		}
	}
}

// drain drains the pipeline and checks Run's result.
func (r *shardedRun) drain() {
	r.t.Helper()
	if err := r.p.Drain(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	if err := <-r.done; err != nil {
		r.t.Fatal(err)
	}
}

// A partition key function that panics on a key of a shard's state, loaded
// from another worker's snapshot, fails the Load with the panic, and Run
// with it, instead of crashing the process (every worker that took the
// shard would crash the same way).
func TestStatePerShardLoadPanic(t *testing.T) {
	count := func(_ *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
		return stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
	}
	poison := keyIn(t, true)
	r := startSharded(t, count)
	if err := r.ss.Load(r.ctx, loShard); err != nil {
		t.Fatal(err)
	}
	r.push("lo", 1, poison)
	r.waitFor("poison counted", map[string]int{poison: 1})
	data, _, err := r.ss.Snapshot(r.ctx, loShard)
	if err != nil {
		t.Fatal(err)
	}
	r.drain()

	r = startShardedBy(t, func(k string) string {
		if k == poison {
			panic("no key for " + k)
		}
		return k
	}, count)
	err = r.ss.Load(r.ctx, loShard, data)
	if err == nil || !strings.Contains(err.Error(), "panic: no key for "+poison) {
		t.Fatalf("Load of a state holding a key the partition key function panics on = %v, want the panic", err)
	}
	r.drain()
}

// State per shard replaces the recovery log: Run refuses both, naming the
// operator and the fix.
func TestStatePerShardRefusesRecovery(t *testing.T) {
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond, Recovery: recovery.Dir(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	pairs := stream.Map(stream.From(p, newShardedSource()), func(k string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: k, Value: 1} })
	counts := stream.UpdateStateByKey(stream.PartitionedBy(pairs, func(k string) string { return k }),
		func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
	stream.ForEachBatch(counts, func(context.Context, *batch.Batch[stream.Pair[string, int]]) error { return nil })
	err = p.Validate()
	if !errors.Is(err, stream.ErrInvalidConfig) || !strings.Contains(err.Error(), "UpdateStateByKey") || !strings.Contains(err.Error(), "remove Config.Recovery") {
		t.Errorf("Validate: %v; want ErrInvalidConfig naming UpdateStateByKey and saying to remove Config.Recovery", err)
	}
}

// md5High reports whether k's MD5, as a hash key, is in the upper half.
func md5High(k string) bool {
	sum := md5.Sum([]byte(k))
	return sum[0] >= 0x80
}

// A MapWithState kept per shard calls its function only for the records
// of loaded shards' keys.
func TestStatePerShardMapWithState(t *testing.T) {
	src := newShardedSource()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pairs := stream.Map(stream.From(p, src), func(k string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: k, Value: 1} })
	mapped, _ := stream.MapWithState(stream.PartitionedBy(pairs, func(k string) string { return k }),
		func(k string, v int, st *stream.State[int]) (string, bool) {
			st.Update(st.Get() + v)
			return k + "=" + strconv.Itoa(st.Get()), true
		})
	// ForEachBatch, not ForEach: ForEach runs slices of MapWithState's
	// output concurrently, so it promises no order between the key's two
	// records.
	seen := make(chan string, 100)
	stream.ForEachBatch(mapped, func(_ context.Context, b *batch.Batch[string]) error {
		for s := range b.All() {
			seen <- s
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	ss := <-src.states
	lo, hi := keyIn(t, true), keyIn(t, false)
	if err := ss.Load(ctx, loShard); err != nil {
		t.Fatal(err)
	}
	for _, r := range []shardPush{{shard: "hi", first: 1, keys: []string{hi}}, {shard: "lo", first: 1, keys: []string{lo, lo}}} {
		r.done = make(chan error, 1)
		src.push <- r
		if err := <-r.done; err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < 2 {
		select {
		case s := <-seen:
			got = append(got, s)
		case <-ctx.Done():
			t.Fatalf("mapped %v, want %s=1 and %s=2", got, lo, lo)
		}
	}
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(seen)
	for s := range seen {
		got = append(got, s)
	}
	if want := []string{lo + "=1", lo + "=2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mapped %v, want %v (the key of shard hi, not loaded, left out)", got, want)
	}
}

// The windowed operators keep their history per shard too: a
// ReduceByKeyAndWindow (with and without an inverse) and a Window of pairs
// declared PartitionedBy leave out the records of shards not loaded, give
// a shard's records in Snapshot, forget them on Drop and take them back on
// Load.
func TestStatePerShardWindows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]]
	}{
		{"ReduceByKeyAndWindow", func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
			return stream.ReduceByKeyAndWindow(pairs, sum, nil, time.Hour, p.BatchInterval())
		}},
		{"ReduceByKeyAndWindow with inverse", func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
			return stream.ReduceByKeyAndWindow(pairs, sum, func(a, b int) int { return a - b }, time.Hour, p.BatchInterval())
		}},
		{"Window", func(p *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
			return stream.ReduceByKey(stream.Window(pairs, time.Hour, p.BatchInterval()), sum)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startSharded(t, tc.build)
			ctx, ss := r.ctx, r.ss
			lo, hi := keyIn(t, true), keyIn(t, false)
			if err := ss.Load(ctx, loShard); err != nil {
				t.Fatal(err)
			}
			r.push("lo", 1, lo, lo, lo)
			r.push("hi", 1, hi, hi)
			r.waitFor("lo in the window, hi left out", map[string]int{lo: 3})
			data, upTo, err := ss.Snapshot(ctx, loShard)
			if err != nil || upTo != "3" {
				t.Fatalf("Snapshot(lo): upTo %q, %v; want 3", upTo, err)
			}
			if err := ss.Drop(ctx, loShard); err != nil {
				t.Fatal(err)
			}
			r.waitFor("lo dropped", map[string]int{})
			if err := ss.Load(ctx, loShard, data); err != nil {
				t.Fatal(err)
			}
			r.push("lo", 4, lo)
			r.waitFor("lo's window loaded and one more record", map[string]int{lo: 4})
			r.drain()
		})
	}
}

// tally is a MapWithState state that merges (as sink/kinesis's
// Deduplicate filter does).
type tally struct{ N int }

func (t *tally) MergeFrom(o *tally) { t.N += o.N }

// tallyByKey returns a pipeline reading src whose MapWithState, declared
// PartitionedByKey, counts each record by itself as key (a *tally) and
// emits "<key>=<count>" for each.
func tallyByKey(t *testing.T, src *shardedSource) (*stream.Pipeline, *stream.Stream[string]) {
	t.Helper()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	byKey := stream.Map(stream.From(p, src), func(k string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: k, Value: 1} })
	mapped, _ := stream.MapWithState(byKey, func(k string, v int, st *stream.State[*tally]) (string, bool) {
		if !st.Exists() {
			st.Update(&tally{})
		}
		st.Get().N += v
		return k + "=" + strconv.Itoa(st.Get().N), true
	}, stream.PartitionedByKey())
	return p, mapped
}

// A state kept by shard ID (MapWithState declared PartitionedByKey) passes
// to a reshard's child under the child's ID, both parents' merged: the
// child of a merge starts from the tally of both.
func TestStatePerShardByIDToChild(t *testing.T) {
	src := newShardedSource()
	// A record is the ID of the shard it is pushed on.
	p, mapped := tallyByKey(t, src)
	seen := make(chan string, 100)
	stream.ForEach(mapped, func(_ context.Context, s string) error { seen <- s; return nil })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	ss := <-src.states
	if ss == nil {
		t.Fatal("Runtime.ShardState is nil for a MapWithState keyed by shard ID on a source sharing its shards")
	}
	push := func(shard string, n int) {
		t.Helper()
		keys := make([]string, n)
		for i := range keys {
			keys[i] = shard
		}
		d := make(chan error, 1)
		src.push <- shardPush{shard: shard, first: 1, keys: keys, done: d}
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	wait := func(want string) {
		t.Helper()
		for {
			select {
			case s := <-seen:
				if s == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %s", want)
			}
		}
	}
	child := source.Shard{Stream: "s", ID: "child", StartingHashKey: "0", EndingHashKey: hiShard.EndingHashKey}
	var parents [][]byte
	for _, tc := range []struct {
		sh source.Shard
		n  int
	}{{loShard, 2}, {hiShard, 3}} {
		if err := ss.Load(ctx, tc.sh); err != nil {
			t.Fatal(err)
		}
		push(tc.sh.ID, tc.n)
		wait(tc.sh.ID + "=" + strconv.Itoa(tc.n))
		data, _, err := ss.Snapshot(ctx, tc.sh)
		if err != nil {
			t.Fatal(err)
		}
		parents = append(parents, data)
		if err := ss.Drop(ctx, tc.sh); err != nil {
			t.Fatal(err)
		}
	}
	if err := ss.Load(ctx, child, parents...); err != nil {
		t.Fatal(err)
	}
	push("child", 1)
	wait("child=6")
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStatePerShardByKeyNotShardID runs a MapWithState declared
// PartitionedByKey whose string keys are not shard IDs (a user key, each
// read from one shard, as the declaration says) on a source sharing its
// shards: its state is per worker, as before state per shard, and its
// function is called for every record. Kept by shard ID, a key that was no
// loaded shard's was taken for a record of a shard no longer read, and
// left out: the operator gave nothing at all. A key that is the ID of a
// shard dropped is still left out (its next owner counts it).
func TestStatePerShardByKeyNotShardID(t *testing.T) {
	src := newShardedSource()
	p, mapped := tallyByKey(t, src)
	var mu sync.Mutex
	var seen []string
	stream.ForEach(mapped, func(_ context.Context, s string) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	ss := <-src.states
	push := func(shard string, first int, keys ...string) {
		t.Helper()
		d := make(chan error, 1)
		src.push <- shardPush{shard: shard, first: first, keys: keys, done: d}
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if err := ss.Load(ctx, loShard); err != nil {
		t.Fatal(err)
	}
	if err := ss.Load(ctx, hiShard); err != nil {
		t.Fatal(err)
	}
	push("lo", 1, "user-a", "user-a")
	push("hi", 1, "user-b")
	if err := ss.Drop(ctx, hiShard); err != nil {
		t.Fatal(err)
	}
	push("hi", 2, "hi") // a key that is a dropped shard's ID
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(seen)
	if diff := cmp.Diff([]string{"user-a=1", "user-a=2", "user-b=1"}, seen); diff != "" {
		t.Errorf("MapWithState's outputs (-want +got):\n%s", diff)
	}
}

// A batch that failed may have moved the state of a shard (its stateful
// operators ran before its output failed) without completing: Snapshot
// refuses to give that state, which would hold the batch's records at a
// position before them, so the shard's next owner, reading after that
// position, would count them twice.
func TestStatePerShardNoSnapshotAfterFailedBatch(t *testing.T) {
	src := newShardedSource()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	pairs := stream.Map(stream.From(p, src), func(k string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: k, Value: 1} })
	counts := stream.UpdateStateByKey(stream.PartitionedBy(pairs, func(k string) string { return k }),
		func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
	seen := make(chan int, 100)
	errOutput := errors.New("output failed")
	stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
		for kv := range b.All() {
			seen <- kv.Value
			if kv.Value > 3 {
				return errOutput
			}
		}
		return nil
	}, stream.Retry(0))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	ss := <-src.states
	if err := ss.Load(ctx, loShard); err != nil {
		t.Fatal(err)
	}
	lo := keyIn(t, true)
	push := func(first int, keys ...string) {
		d := make(chan error, 1)
		src.push <- shardPush{shard: "lo", first: first, keys: keys, done: d}
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	push(1, lo, lo, lo)
	for n := 0; n != 3; {
		n = <-seen
	}
	if _, upTo, err := ss.Snapshot(ctx, loShard); err != nil || upTo != "3" {
		t.Fatalf("Snapshot(lo) after a completed batch: upTo %q, %v; want 3", upTo, err)
	}
	push(4, lo)
	if err := <-done; !errors.Is(err, errOutput) {
		t.Fatalf("Run = %v, want the output's error", err)
	}
	if data, upTo, err := ss.Snapshot(ctx, loShard); err == nil {
		t.Errorf("Snapshot(lo) after the failed batch = %d bytes, upTo %q, nil error; want an error: the state counts the failed batch's record at 4", len(data), upTo)
	}
}

// The state is kept per shard through any chain of one-input operators
// between PartitionedBy and the state, a shuffle (ReduceByKey) and a
// Transform included: the keys they keep are still placed by the
// partition key declared (that they keep the key is the declaration's
// promise, as for a Map). A record of a shard not loaded gets no state.
func TestStatePerShardThroughOneInputOperators(t *testing.T) {
	r := startSharded(t, func(_ *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
		same := stream.Transform(pairs, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) (*batch.Batch[stream.Pair[string, int]], error) {
			return b, nil
		})
		reduced := stream.ReduceByKey(same, func(a, b int) int { return a + b })
		return stream.UpdateStateByKey(reduced, func(_ string, vs []int, n int, _ bool) (int, bool) {
			for _, v := range vs {
				n += v
			}
			return n, true
		})
	})
	lo, hi := keyIn(t, true), keyIn(t, false)
	if err := r.ss.Load(r.ctx, loShard); err != nil {
		t.Fatal(err)
	}
	r.push("hi", 1, hi) // hi is not loaded: its key gets no state
	r.push("lo", 1, lo, lo)
	r.waitFor("lo counted, hi left out", map[string]int{lo: 2})
	r.drain()
}
