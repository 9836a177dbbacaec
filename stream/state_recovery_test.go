package stream_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// stateKey is the key of a record of the state tests: "r<n>" has key
// "k<n mod 5>".
func stateKey(rec string) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(rec, "r"))
	return "k" + strconv.Itoa(n%5)
}

// stateTimeout is the MapWithState timeout of the state tests.
const stateTimeout = 3 * time.Second

// stateSeen is what the outputs of every run of a state test saw: the
// records of each batch, and, by batch time, each operator's output.
type stateSeen struct {
	mu      sync.Mutex
	records map[batch.Time][]string
	counts  map[batch.Time]map[string]int // UpdateStateByKey
	mws     map[batch.Time]map[string]int // MapWithState snapshots
	window  map[batch.Time]map[string]int // ReduceByKeyAndWindow with inverse
	// windowOrder is the window's pairs as output, in order.
	windowOrder map[batch.Time][]stream.Pair[string, int]
	windowN     map[batch.Time]map[string]int // ReduceByKeyAndWindow without
	win         map[batch.Time]int            // Window: records in the window
	timeout     map[batch.Time][]string       // MapWithState: the keys timed out, sorted
	clash       []string
	runs        map[batch.Time]int // calls of the records output
}

func newStateSeen() *stateSeen {
	return &stateSeen{records: map[batch.Time][]string{}, counts: map[batch.Time]map[string]int{},
		mws: map[batch.Time]map[string]int{}, window: map[batch.Time]map[string]int{},
		windowN: map[batch.Time]map[string]int{}, win: map[batch.Time]int{}, runs: map[batch.Time]int{},
		windowOrder: map[batch.Time][]stream.Pair[string, int]{},
		timeout:     map[batch.Time][]string{}}
}

func pairsMap(b *batch.Batch[stream.Pair[string, int]]) map[string]int {
	m := map[string]int{}
	for kv := range b.All() {
		m[kv.Key] = kv.Value
	}
	return m
}

// statePipeline builds the state test pipeline on d: the replay source, a
// running count per key with UpdateStateByKey, one with MapWithState and
// a timeout, windowed sums with and without an inverse, and a Window.
func statePipeline(t *testing.T, d *durable, seen *stateSeen, hook func(ctx context.Context, b *batch.Batch[string]) error) (*stream.Pipeline, *replay) {
	t.Helper()
	return statePipelineOf(t, d, seen, hook, defaultStateOpts)
}

// defaultStateOpts are statePipeline's.
var defaultStateOpts = stateOpts{keepCounts: true, timeout: stateTimeout}

// stateOpts vary the state test pipeline.
type stateOpts struct {
	// keepCounts false: UpdateStateByKey drops a key in a batch without
	// values of it, so that an idle pipeline's operators come to hold no
	// state.
	keepCounts bool
	// noSnaps: no output of MapWithState's snapshots, so that an idle
	// MapWithState with keys is quiet until one times out.
	noSnaps bool
	timeout time.Duration // MapWithState's
	// unshared: each stateful operator reads pairs of its own Map, fused
	// with its map tasks (see parted.transient), with Parallelism 4.
	unshared bool
}

// statePipelineOf is statePipeline varied by o.
func statePipelineOf(t *testing.T, d *durable, seen *stateSeen, hook func(ctx context.Context, b *batch.Batch[string]) error, o stateOpts) (*stream.Pipeline, *replay) {
	t.Helper()
	keepCounts := o.keepCounts
	par := 0
	if o.unshared {
		par = 4
	}
	p, err := stream.NewPipeline(stream.Config{
		Parallelism:           par,
		BatchInterval:         time.Second,
		Recovery:              d.log,
		CompactEvery:          3,
		StateSnapshotInterval: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	src := newReplay(t, d)
	s := stream.From(p, src)
	stream.ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
		recs := slices.Collect(b.All())
		seen.mu.Lock()
		if old, ok := seen.records[b.Time()]; ok && !slices.Equal(old, recs) {
			seen.clash = append(seen.clash, b.Time().String())
		}
		seen.records[b.Time()] = recs
		seen.runs[b.Time()]++
		seen.mu.Unlock()
		if hook != nil {
			return hook(ctx, b)
		}
		return nil
	}, stream.Named("records"))
	var shared *stream.Stream[stream.Pair[string, int]]
	pairs := func() *stream.Stream[stream.Pair[string, int]] {
		if shared == nil || o.unshared {
			shared = stream.Map(s, func(r string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: stateKey(r), Value: 1} })
		}
		return shared
	}
	counts := stream.UpdateStateByKey(pairs(), func(_ string, vs []int, st int, _ bool) (int, bool) {
		return st + len(vs), keepCounts || len(vs) > 0
	})
	put := func(m map[batch.Time]map[string]int) func(context.Context, *batch.Batch[stream.Pair[string, int]]) error {
		return func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			m[b.Time()] = pairsMap(b)
			return nil
		}
	}
	stream.ForEachBatch(counts, put(seen.counts), stream.Named("counts"))
	timedOut, snaps := stream.MapWithState(pairs(), func(k string, v int, st *stream.State[int]) (string, bool) {
		if st.IsTimingOut() {
			return k, true
		}
		st.Update(st.Get() + v)
		return "", false
	}, stream.StateTimeout(o.timeout))
	if !o.noSnaps {
		stream.ForEachBatch(snaps, put(seen.mws), stream.Named("mws"))
	}
	stream.ForEachBatch(timedOut, func(_ context.Context, b *batch.Batch[string]) error {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		seen.timeout[b.Time()] = slices.Sorted(b.All())
		return nil
	}, stream.Named("timeouts"))
	sum := func(a, b int) int { return a + b }
	sub := func(a, b int) int { return a - b }
	stream.ForEachBatch(stream.ReduceByKeyAndWindow(pairs(), sum, sub, 3*time.Second, time.Second), func(ctx context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
		// A window run again must be the one first output, in order (G2).
		recs := b.Records()
		seen.mu.Lock()
		if old, ok := seen.windowOrder[b.Time()]; ok && !slices.Equal(old, recs) {
			seen.clash = append(seen.clash, "window "+b.Time().String())
		}
		seen.windowOrder[b.Time()] = recs
		seen.mu.Unlock()
		return put(seen.window)(ctx, b)
	}, stream.Named("window"))
	stream.ForEachBatch(stream.ReduceByKeyAndWindow(pairs(), sum, nil, 4*time.Second, 2*time.Second), put(seen.windowN), stream.Named("windowN"))
	stream.ForEachBatch(stream.Window(s, 2*time.Second, time.Second), func(_ context.Context, b *batch.Batch[string]) error {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		seen.win[b.Time()] = b.Len()
		return nil
	}, stream.Named("win"))
	return p, src
}

// stateTruth computes what every operator must output at the last batch
// time from the records of every batch, in time order: the truth of a run
// never interrupted.
func stateTruth(records map[batch.Time][]string) (last batch.Time, counts, mws, window, windowN map[string]int, win int) {
	times := slices.Sorted(maps.Keys(records))
	last = times[len(times)-1]
	counts, mws, window, windowN = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	lastSeen := map[string]batch.Time{}
	for _, t := range times {
		for _, r := range records[t] {
			k := stateKey(r)
			counts[k]++
			mws[k]++
			lastSeen[k] = t
			if t > last.Add(-3*time.Second) {
				window[k]++
			}
			if t > last.Add(-4*time.Second) {
				windowN[k]++
			}
			if t > last.Add(-2*time.Second) {
				win++
			}
		}
		for k, l := range lastSeen {
			if t.Std().Sub(l.Std()) >= stateTimeout {
				delete(mws, k)
				delete(lastSeen, k)
			}
		}
	}
	return last, counts, mws, window, windowN, win
}

// stateCrash is a crash of a state test's first run.
type stateCrash struct {
	name  string
	setup func(d *durable, stop func()) func(ctx context.Context, b *batch.Batch[string]) error
}

func stateCrashes() []stateCrash {
	nth := func(k recoverylog.Kind, n, keep int) func(*durable, func()) func(context.Context, *batch.Batch[string]) error {
		return func(d *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			d.log.SetAppendHook(nthAppend(k, n, keep, stop))
			return nil
		}
	}
	return []stateCrash{
		{"after the snapshot write, before its entry", nth(recoverylog.KindSnapshot, 3, 0)},
		{"right after a snapshot entry", func(d *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			snaps, crashed := 0, false
			d.log.SetAppendHook(func(_ int, entries []recoverylog.Entry) recoverylog.Fault {
				switch {
				case crashed:
				case snaps == 2:
					crashed = true
					stop()
					return recoverylog.Fault{Err: errCrash}
				case entries[0].Kind == recoverylog.KindSnapshot:
					snaps++
				}
				return recoverylog.Fault{}
			})
			return nil
		}},
		{"at a completion append", nth(recoverylog.KindBatchCompleted, 7, 0)},
		{"completion appended, crash", nth(recoverylog.KindBatchCompleted, 5, 1)},
		{"during a snapshot write", func(d *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			n := 0
			d.log.SetSnapshotHook(func(batch.Time, []byte) error {
				if n++; n == 2 {
					stop()
					return errCrash
				}
				return nil
			})
			return nil
		}},
		{"in an output", func(_ *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			n := 0
			return func(ctx context.Context, b *batch.Batch[string]) error {
				if b.Len() > 0 {
					if n++; n == 8 {
						stop()
						return ctx.Err()
					}
				}
				return nil
			}
		}},
	}
}

// TestStateRecovery crashes a pipeline with every stateful operator at
// each point where a snapshot or the log can be cut short, then crashes
// the restarted one during its replay, then lets a third drain: every
// operator's output at the last batch must equal what a run never
// interrupted computes from the same batches, so no update was applied
// twice or missed. All in virtual time, on the memory source and log.
func TestStateRecovery(t *testing.T) {
	for _, tc := range stateCrashes() {
		for _, crashReplay := range []bool{false, true} {
			name := tc.name
			if crashReplay {
				name += ", then during the replay"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { testStateRecovery(t, tc, crashReplay, defaultStateOpts) })
			})
		}
	}
}

// TestStateRecoveryUnshared is TestStateRecovery with each stateful
// operator reading records of its own Map, whose chain runs fused with
// the operator's map tasks, in parallel in a run and in one goroutine in
// the replay after a restart.
func TestStateRecoveryUnshared(t *testing.T) {
	o := defaultStateOpts
	o.unshared = true
	for _, tc := range stateCrashes() {
		t.Run(tc.name+", then during the replay", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testStateRecovery(t, tc, true, o) })
		})
	}
}

func testStateRecovery(t *testing.T, tc stateCrash, crashReplay bool, o stateOpts) {
	d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
	seen := newStateSeen()

	var p1 *stream.Pipeline
	hook := tc.setup(d, func() { p1.Stop() })
	p1, src1 := statePipelineOf(t, d, seen, hook, o)
	errc := make(chan error, 1)
	go func() { errc <- p1.Run(t.Context()) }()
	time.Sleep(300 * time.Millisecond)
	if err := produceUntil(d, src1, 150, errc); err != nil && !errors.Is(err, errCrash) {
		t.Fatalf("first Run: %v", err)
	}
	d.log.SetAppendHook(nil)
	d.log.SetSnapshotHook(nil)
	st, err := recoverylog.Recover(d.log.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if st.Snapshot == nil || st.Snapshot.Ref == "" {
		t.Fatalf("the first run left no snapshot (%v): the test does not test", st.Snapshot)
	}
	if len(st.Replay) == 0 && len(st.Pending) == 0 {
		t.Logf("%s: nothing to replay after the snapshot at %v", tc.name, st.Snapshot.Time)
	}

	if crashReplay {
		// The second run is stopped inside its first recompute: during the
		// replay of the batches after the snapshot, or of the pending ones.
		var p2 *stream.Pipeline
		p2, src2 := statePipelineOf(t, d, seen, nil, o)
		src2.onRecompute = func() { p2.Stop() }
		errc := make(chan error, 1)
		go func() { errc <- p2.Run(t.Context()) }()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("second Run, stopped during the replay: %v", err)
			}
		case <-time.After(time.Minute):
			if len(st.Replay)+len(st.Pending) > 0 {
				t.Fatalf("the second run recomputed nothing in a minute, with %d batches to replay and %d pending",
					len(st.Replay), len(st.Pending))
			}
			p2.Stop()
			<-errc
		}
	}

	p3, src3 := statePipelineOf(t, d, seen, nil, o)
	errc = make(chan error, 1)
	go func() { errc <- p3.Run(t.Context()) }()
	for range 5 {
		src3.produce(d.record(), d.record())
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(6 * time.Second) // idle batches: keys time out
	p3.Drain(context.Background())
	if err := <-errc; err != nil {
		t.Fatalf("last Run: %v", err)
	}

	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.clash) > 0 {
		t.Errorf("batches run again with other records: %v", seen.clash)
	}
	// Only the batches the crash left pending run their outputs again;
	// those replayed for the state do not.
	pending := map[batch.Time]bool{}
	for _, p := range st.Pending {
		pending[p.Time] = true
	}
	for bt, n := range seen.runs {
		if n > 1 && !pending[bt] {
			t.Errorf("the outputs of batch %v ran %d times; it was not pending after the crash", bt, n)
		}
	}
	var produced, got []string
	for _, c := range d.calls {
		produced = append(produced, c...)
	}
	for _, recs := range seen.records {
		got = append(got, recs...)
	}
	if diff := cmp.Diff(produced, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Fatalf("records of the batches (-produced +seen):\n%s", diff)
	}
	last, counts, mws, window, windowN, win := stateTruth(seen.records)
	for _, c := range []struct {
		name string
		got  map[batch.Time]map[string]int
		want map[string]int
	}{
		{"UpdateStateByKey", seen.counts, counts},
		{"MapWithState", seen.mws, mws},
		{"ReduceByKeyAndWindow with inverse", seen.window, window},
		{"ReduceByKeyAndWindow without inverse", seen.windowN, windowN},
	} {
		if c.name == "ReduceByKeyAndWindow without inverse" && !validSlide(last, 2*time.Second) {
			continue
		}
		if diff := cmp.Diff(c.want, c.got[last], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s at the last batch %v (-truth +got):\n%s", c.name, last, diff)
		}
	}
	if seen.win[last] != win {
		t.Errorf("Window at the last batch %v: %d records, truth %d", last, seen.win[last], win)
	}
	if counts["k1"] == 0 {
		t.Errorf("no counts: the test does not test")
	}
}

func validSlide(t batch.Time, slide time.Duration) bool { return int64(t)%slide.Milliseconds() == 0 }

// TestStateReplayRangeUnavailable checks that a range the source can no
// longer serve while the state is replayed fails the Run, as for a pending
// batch under the source's range policy, with an error that says the batch
// was being replayed and wraps the source's.
func TestStateReplayRangeUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
		var p1 *stream.Pipeline
		d.log.SetAppendHook(nthAppend(recoverylog.KindSnapshot, 3, 0, func() { p1.Stop() }))
		p1, src1 := statePipeline(t, d, newStateSeen(), nil)
		errc := make(chan error, 1)
		go func() { errc <- p1.Run(t.Context()) }()
		time.Sleep(300 * time.Millisecond)
		if err := produceUntil(d, src1, 150, errc); err != nil && !errors.Is(err, errCrash) {
			t.Fatalf("first Run: %v", err)
		}
		d.log.SetAppendHook(nil)
		st, err := recoverylog.Recover(d.log.Entries())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Replay) == 0 {
			t.Fatalf("nothing to replay: the test does not test")
		}
		p2, src2 := statePipeline(t, d, newStateSeen(), nil)
		expired := &memory.RangeNotHeldError{Range: st.Replay[0].Blocks[0].Ranges[0]}
		src2.recomputeErr = expired
		err = p2.Run(t.Context())
		var be *stream.BatchError
		var nh *memory.RangeNotHeldError
		if !errors.As(err, &be) || be.Time != st.Replay[0].Time || !errors.As(err, &nh) ||
			!strings.Contains(err.Error(), "replaying the completed batch") {
			t.Fatalf("Run = %v; want a *BatchError of batch %v, replaying, wrapping the *RangeNotHeldError", err, st.Replay[0].Time)
		}
	})
}

// TestStateRemoved checks a restart after the stateful operators were
// removed from the pipeline: with a snapshot holding state it is refused as
// a changed graph; a stateless pipeline on a log whose snapshot is the
// empty state goes on releasing the completed batches.
func TestStateRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
		p1, src1 := statePipeline(t, d, newStateSeen(), nil)
		errc := make(chan error, 1)
		go func() { errc <- p1.Run(t.Context()) }()
		time.Sleep(300 * time.Millisecond)
		for range 60 {
			src1.produce(d.record())
			time.Sleep(100 * time.Millisecond)
		}
		p1.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		stateless := func() (*stream.Pipeline, *replay) {
			p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: d.log, CompactEvery: 3,
				StateSnapshotInterval: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			src := newReplay(t, d)
			s := stream.From(p, src)
			for _, name := range []string{"records", "counts", "mws", "timeouts", "window", "windowN", "win"} {
				stream.ForEachBatch(s, func(context.Context, *batch.Batch[string]) error { return nil }, stream.Named(name))
			}
			return p, src
		}
		p2, _ := stateless()
		if err := p2.Run(t.Context()); !errors.Is(err, recovery.ErrShapeChanged) || !strings.Contains(err.Error(), "stateful operators were") {
			t.Fatalf("Run without the stateful operators, on a snapshot holding state: got %v, want ErrShapeChanged", err)
		}

		d = &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
		if l, err := recoverylog.Open(t.Context(), d.log, nil); err != nil {
			t.Fatal(err)
		} else {
			if err := l.Append(t.Context(), recoverylog.SnapshotTaken(0, "")); err != nil {
				t.Fatal(err)
			}
			l.Close()
		}
		// Records in every batch: an empty batch of a stateless pipeline
		// is not logged, so it keeps nothing for a replay.
		p, src := stateless()
		go func() { errc <- p.Run(t.Context()) }()
		for range 40 {
			time.Sleep(500 * time.Millisecond)
			src.produce(d.record())
		}
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		st, err := recoverylog.Recover(d.log.Entries())
		if err != nil {
			t.Fatal(err)
		}
		if st.Snapshot == nil || st.Snapshot.Time == 0 || len(st.Replay) > 3 {
			t.Errorf("a stateless pipeline on a log with an empty snapshot keeps %d batches for a replay after the snapshot %v, want at most 3 after a recent one", len(st.Replay), st.Snapshot)
		}
	})
}
