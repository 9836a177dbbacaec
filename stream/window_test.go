package stream

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/hashkey"
	"github.com/weirstream/weir/source"
)

func TestWindow(t *testing.T) {
	steps := [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}}
	tests := []struct {
		name          string
		length, slide time.Duration
		want          []out[string]
	}{
		{"sliding by one batch, first windows partial", 3 * time.Second, time.Second, []out[string]{
			{0, []string{"a"}}, {1, []string{"a", "b"}}, {2, []string{"a", "b", "c"}},
			{3, []string{"b", "c", "d"}}, {4, []string{"c", "d", "e"}}, {5, []string{"d", "e", "f"}},
		}},
		{"slide of two batches", 4 * time.Second, 2 * time.Second, []out[string]{
			{1, []string{"a", "b"}}, {3, []string{"a", "b", "c", "d"}}, {5, []string{"c", "d", "e", "f"}},
		}},
		{"tumbling", 3 * time.Second, 3 * time.Second, []out[string]{
			{2, []string{"a", "b", "c"}}, {5, []string{"d", "e", "f"}},
		}},
		{"slide longer than length", time.Second, 2 * time.Second, []out[string]{
			{1, []string{"b"}}, {3, []string{"d"}}, {5, []string{"f"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				p, r, s := newTest[string](t, Config{})
				c := collect(Window(s, tt.length, tt.slide))
				if err := feed(t, p, r, steps); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if diff := gocmp.Diff(tt.want, c.outs()); diff != "" {
					t.Errorf("windows (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestWindowOfWindow checks windows of a windowed stream and that operators
// downstream of a window run only at its slide.
func TestWindowOfWindow(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		inner := Window(s, 2*time.Second, 2*time.Second)
		c := collect(Map(Window(inner, 4*time.Second, 4*time.Second), strings.ToUpper))
		if err := feed(t, p, r, [][]string{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []out[string]{{3, []string{"A", "B", "C", "D"}}}
		if diff := gocmp.Diff(want, c.outs()); diff != "" {
			t.Errorf("windows (-want +got):\n%s", diff)
		}
	})
}

// TestWindowBlocks checks a window batch names the blocks of its batches.
func TestWindowBlocks(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		var got [][]string
		w := Window(s, 2*time.Second, time.Second)
		ForEachBatch(w, func(_ context.Context, b *batch.Batch[string]) error {
			var ids []string
			for _, id := range b.BlockIDs() {
				ids = append(ids, id.String())
			}
			got = append(got, ids)
			return nil
		})
		if err := feed(t, p, r, [][]string{{"a"}, {"b"}, {"c"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := [][]string{{"block-0-0"}, {"block-0-0", "block-0-1"}, {"block-0-1", "block-0-2"}}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("window blocks (-want +got):\n%s", diff)
		}
	})
}

func sortPairs[V any](outs []out[Pair[string, V]]) []out[Pair[string, V]] {
	for _, o := range outs {
		slices.SortFunc(o.Records, func(a, b Pair[string, V]) int { return cmp.Compare(a.Key, b.Key) })
	}
	return outs
}

func TestReduceByKeyAndWindow(t *testing.T) {
	steps := [][]string{{"a b", "a"}, {"a"}, {"c"}, {""}, {"b b"}, nil, {"a c"}}
	tests := []struct {
		name          string
		length, slide time.Duration
		want          []out[kv] // sorted by key
	}{
		{"sliding by one batch", 3 * time.Second, time.Second, []out[kv]{
			{0, []kv{{"a", 2}, {"b", 1}}},
			{1, []kv{{"a", 3}, {"b", 1}}},
			{2, []kv{{"a", 3}, {"b", 1}, {"c", 1}}},
			{3, []kv{{"a", 1}, {"c", 1}}},
			{4, []kv{{"b", 2}, {"c", 1}}},
			{5, []kv{{"b", 2}}},
			{6, []kv{{"a", 1}, {"b", 2}, {"c", 1}}},
		}},
		{"slide of two batches", 4 * time.Second, 2 * time.Second, []out[kv]{
			{1, []kv{{"a", 3}, {"b", 1}}},
			{3, []kv{{"a", 3}, {"b", 1}, {"c", 1}}},
			{5, []kv{{"b", 2}, {"c", 1}}},
		}},
		{"slide longer than length", time.Second, 2 * time.Second, []out[kv]{
			{1, []kv{{"a", 1}}},
			{3, nil},
			{5, nil},
		}},
	}
	for _, tt := range tests {
		for _, inverse := range []func(int, int) int{nil, sub} {
			name := tt.name + ", recomputed"
			if inverse != nil {
				name = tt.name + ", with inverse"
			}
			t.Run(name, func(t *testing.T) {
				inBubble(t, func(t *testing.T) {
					p, r, s := newTest[string](t, Config{})
					c := collect(ReduceByKeyAndWindow(wordPairs(s), sum, inverse, tt.length, tt.slide))
					if err := feed(t, p, r, steps); err != nil {
						t.Fatalf("Run: %v", err)
					}
					if diff := gocmp.Diff(tt.want, sortPairs(c.outs()), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("windows (-want +got):\n%s", diff)
					}
				})
			})
		}
	}
}

// TestReduceByKeyAndWindowInverseEqualsRecompute runs both ways side by side
// on the same stream, over a longer input.
func TestReduceByKeyAndWindowInverseEqualsRecompute(t *testing.T) {
	words := strings.Fields("a b c d e a a b z y x a c c")
	var steps [][]string
	for i := range 40 {
		var line []string
		for j := range i % 5 {
			line = append(line, words[(i*7+j*3)%len(words)])
		}
		steps = append(steps, []string{strings.Join(line, " ")})
	}
	for _, w := range [][2]time.Duration{{3 * time.Second, time.Second}, {6 * time.Second, 2 * time.Second}, {2 * time.Second, 3 * time.Second}} {
		t.Run(w[0].String()+"/"+w[1].String(), func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				p, r, s := newTest[string](t, Config{})
				pairs := wordPairs(s)
				plain := collect(ReduceByKeyAndWindow(pairs, sum, nil, w[0], w[1]))
				inc := collect(ReduceByKeyAndWindow(pairs, sum, sub, w[0], w[1]))
				if err := feed(t, p, r, steps); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if diff := gocmp.Diff(sortPairs(plain.outs()), sortPairs(inc.outs()), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("(-recomputed +inverse):\n%s", diff)
				}
			})
		})
	}
}

// TestWindowHistoryDropsOldBatches checks that a window's history keeps
// only the batches a window can still need: those after t-keep.
func TestWindowHistoryDropsOldBatches(t *testing.T) {
	p, _, s := newTest[string](t, Config{})
	h := &history[string]{}
	tick := h.tick(s, 3*time.Second, nil)
	for i := range 6 {
		r := &run{ctx: t.Context(), job: &job{time: batch.Time((i + 1) * 1000), blocks: make([][]batch.BlockInfo, 1)}, memo: make([]any, len(p.nodes))}
		if err := tick(r); err != nil {
			t.Fatalf("tick at %v: %v", r.job.time, err)
		}
	}
	var got []batch.Time
	for _, b := range h.bs {
		got = append(got, b.Time())
	}
	want := []batch.Time{4000, 5000, 6000}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("kept batch times (-want +got):\n%s", diff)
	}
}

// TestReduceByKeyAndWindowSameAfterReplay checks that a window with an
// inverse, recomputed after a restart, is the one the run made, pairs in
// the same order (G2: sink/kinesis's origin tags know a record by its
// index in the batch). The restart restores the snapshot taken after an
// earlier batch and replays the batches completed since as the engine
// does, with the stateful nodes' ticks only; then the next window is
// computed as in the run. A key that stays in the window keeps its place
// incrementally, where a window reduced from its batches lists keys in
// the order they first appear: b before a in the window of batches 2-3.
func TestReduceByKeyAndWindowSameAfterReplay(t *testing.T) {
	perBatch := [][]kv{{{"a", 1}}, {{"a", 1}}, {{"b", 1}, {"a", 1}}, {{"c", 1}}, {{"a", 1}, {"c", 1}}, nil, {{"b", 1}}}
	// build returns the window's node and its per-batch stream's.
	build := func() (win, pb *node, nodes int) {
		p, _, s := newTest[string](t, Config{})
		w := ReduceByKeyAndWindow(wordPairs(s), sum, sub, 2*time.Second, time.Second)
		return w.n, w.n.parents[0], len(p.nodes)
	}
	// step runs batch i on the window's node as a batch of the engine
	// does, computing the window unless replay, as the engine's replay
	// of a completed batch does not.
	step := func(win, pb *node, nodes, i int, replay bool) []kv {
		tm := batch.Time((i + 1) * 1000)
		r := &run{ctx: t.Context(), job: &job{time: tm}, memo: make([]any, nodes), par: 1}
		r.memo[pb.id] = &result[kv]{b: batch.New(tm, nil, perBatch[i])}
		if err := win.tick(r); err != nil {
			t.Fatalf("tick of batch %d: %v", i, err)
		}
		if replay {
			return nil
		}
		b, err := win.state.(*windowReduce[string, int]).compute(r)
		if err != nil {
			t.Fatalf("window at batch %d: %v", i, err)
		}
		return b.Records()
	}
	for snapAt := range len(perBatch) - 1 {
		win, pb, nodes := build()
		var want [][]kv
		var snap []byte
		for i := range perBatch {
			want = append(want, step(win, pb, nodes, i, false))
			if i == snapAt {
				var err error
				if snap, err = win.state.snapshot(); err != nil {
					t.Fatal(err)
				}
			}
		}
		for crash := snapAt + 1; crash < len(perBatch); crash++ {
			win, pb, nodes := build()
			if err := win.state.restore(snap); err != nil {
				t.Fatal(err)
			}
			for i := snapAt + 1; i < crash; i++ {
				step(win, pb, nodes, i, true)
			}
			for i := crash; i < len(perBatch); i++ {
				if diff := gocmp.Diff(want[i], step(win, pb, nodes, i, false), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("snapshot after batch %d, batches %d-%d replayed: window at batch %d (-run +restarted):\n%s",
						snapAt, snapAt+1, crash-1, i, diff)
				}
			}
		}
	}
}

// TestWindowPerShardLoadedAhead loads into a Window kept per shard the
// history of a shard from a worker a batch ahead of this one, which holds
// a batch later than this worker's next: the next batch's records must
// still be in the window. They were left out of it, behind the later
// batch, when a batch was added to the end of the history whatever its
// time.
func TestWindowPerShardLoadedAhead(t *testing.T) {
	lo, err := parseShard(source.Shard{ID: "lo", StartingHashKey: "0", EndingHashKey: "170141183460469231731687303715884105727"})
	if err != nil {
		t.Fatal(err)
	}
	hi, err := parseShard(source.Shard{ID: "hi", StartingHashKey: "170141183460469231731687303715884105728", EndingHashKey: "340282366920938463463374607431768211455"})
	if err != nil {
		t.Fatal(err)
	}
	key := func(sh shardRange, n int) string {
		for i := 0; ; i++ {
			k := fmt.Sprint("k", i)
			if sh.r.Contains(hashkey.Of(k)) {
				if n == 0 {
					return k
				}
				n--
			}
		}
	}
	p, _, s := newTest[string](t, Config{})
	pairs := PartitionedBy(wordPairs(s), func(k string) string { return k })
	w := Window(pairs, 3*time.Second, time.Second)
	ws := w.n.state.(*windowState[kv])
	view := ws.byShard(w.n)
	if err := view.loadShard(lo, nil); err != nil {
		t.Fatal(err)
	}
	a, c, d := key(lo, 0), key(lo, 1), key(lo, 2)
	b := key(hi, 0)
	step := func(sec int, recs ...string) []string {
		tm := batch.Time(sec * 1000)
		r := &run{ctx: t.Context(), job: &job{time: tm}, memo: make([]any, len(p.nodes)), par: 1}
		var in []kv
		for _, k := range recs {
			in = append(in, kv{k, 1})
		}
		r.memo[pairs.n.id] = &result[kv]{b: batch.New(tm, nil, in)}
		if err := w.n.tick(r); err != nil {
			t.Fatal(err)
		}
		out, err := w.at(r)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for p := range out.All() {
			keys = append(keys, p.Key)
		}
		slices.Sort(keys)
		return keys
	}
	step(1, a)
	// The hi shard's history, from a worker a batch ahead: a batch at 3s.
	var sw snapWriter
	if err := (&history[kv]{bs: []*batch.Batch[kv]{batch.New(3000, nil, []kv{{b, 1}})}}).encode(&sw, ws.rc); err != nil {
		t.Fatal(err)
	}
	if err := view.loadShard(hi, [][]byte{sw.buf}); err != nil {
		t.Fatal(err)
	}
	sorted := func(ks ...string) []string { slices.Sort(ks); return ks }
	if diff := gocmp.Diff(sorted(a, c), step(2, c)); diff != "" {
		t.Errorf("window at 2s (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(sorted(a, b, c, d), step(3, d)); diff != "" {
		t.Errorf("window at 3s (-want +got):\n%s", diff)
	}
}

// TestReduceByKeyAndWindowSnapshotLength: the window an inverse keeps is
// restored to be slid from when its snapshot has the operator's window
// length, or says none (a snapshot written before the length was
// recorded); not when it has another length (a restart with a new one).
func TestReduceByKeyAndWindowSnapshotLength(t *testing.T) {
	build := func(length time.Duration) (*node, *windowReduce[string, int], int) {
		p, _, s := newTest[string](t, Config{})
		w := ReduceByKeyAndWindow(wordPairs(s), sum, sub, length, time.Second)
		return w.n, w.n.state.(*windowReduce[string, int]), len(p.nodes)
	}
	win, w, nodes := build(2 * time.Second)
	for i, recs := range [][]kv{{{"a", 1}}, {{"b", 2}, {"a", 1}}} {
		tm := batch.Time((i + 1) * 1000)
		r := &run{ctx: t.Context(), job: &job{time: tm}, memo: make([]any, nodes), par: 1}
		r.memo[win.parents[0].id] = &result[kv]{b: batch.New(tm, nil, recs)}
		if err := win.tick(r); err != nil {
			t.Fatal(err)
		}
	}
	if !w.ok {
		t.Fatal("no window kept after two ticks")
	}
	current, err := w.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The format before the length: the history, 1, the time, the keys.
	var old snapWriter
	if err := w.h.encode(&old, w.rc); err != nil {
		t.Fatal(err)
	}
	old.uint(1)
	old.int(int64(w.at))
	old.uint(uint64(len(w.win.pairs)))
	pairs := make([]Pair[string, int], len(w.win.pairs))
	for i, kc := range w.win.pairs {
		old.uint(uint64(kc.Value.n))
		pairs[i] = Pair[string, int]{Key: kc.Key, Value: kc.Value.v}
	}
	if err := w.rc.encode(&old, pairs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		snap   []byte
		length time.Duration
		kept   bool
	}{
		{"same length", current, 2 * time.Second, true},
		{"no length recorded", old.buf, 2 * time.Second, true},
		{"another length", current, 3 * time.Second, false},
	} {
		_, got, _ := build(tt.length)
		if err := got.restore(tt.snap); err != nil {
			t.Fatalf("%s: restore: %v", tt.name, err)
		}
		keys := -1 // no window
		if got.win != nil {
			keys = len(got.win.pairs)
		}
		if got.ok != tt.kept || tt.kept && (got.at != w.at || keys != len(w.win.pairs)) {
			t.Errorf("%s: window kept %v at %v with %d keys; want kept %v (at %v, %d keys)", tt.name, got.ok, got.at, keys, tt.kept, w.at, len(w.win.pairs))
		}
	}
}

// TestWindowSamplingLogged: a window that slides further than its length
// leaves the batches between windows out of every window; building one
// says so at INFO, where a user sees it by default.
func TestWindowSamplingLogged(t *testing.T) {
	for _, tt := range []struct {
		name          string
		length, slide time.Duration
		logged        bool
	}{
		{"sampling", time.Second, 2 * time.Second, true},
		{"tumbling", 2 * time.Second, 2 * time.Second, false},
		{"sliding", 2 * time.Second, time.Second, false},
	} {
		var buf strings.Builder
		_, _, s := newTest[string](t, Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		Window(s, tt.length, tt.slide)
		ReduceByKeyAndWindow(wordPairs(s), sum, nil, tt.length, tt.slide)
		if got := strings.Count(buf.String(), "slides further than its length"); got != map[bool]int{true: 2}[tt.logged] {
			t.Errorf("%s: logged %d times, want %v: %s", tt.name, got, tt.logged, buf.String())
		}
	}
}
