package stream_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// TestIdleLogEntriesStateful is TestIdleLogEntries with stateful
// operators holding no state, or a MapWithState whose snapshots are unused
// holding keys that time out after the run: their empty batches change
// nothing, so they are logged as reserved batch times too, not allocated
// and completed one by one.
func TestIdleLogEntriesStateful(t *testing.T) {
	t.Run("no state", func(t *testing.T) { testIdleLogEntriesStateful(t, false) })
	t.Run("keys waiting for their timeout", func(t *testing.T) { testIdleLogEntriesStateful(t, true) })
}

func testIdleLogEntriesStateful(t *testing.T, keys bool) {
	synctest.Test(t, func(t *testing.T) {
		const (
			iv      = 200 * time.Millisecond
			batches = 300 // 60 s
		)
		store := recoverylog.NewMemory()
		appended := recordAppends(store)
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: store})
		if err != nil {
			t.Fatal(err)
		}
		d := &durable{log: store, out: t.TempDir()}
		src := newReplay(t, d)
		pairs := stream.Map(stream.From(p, src), func(r string) stream.Pair[string, int] {
			return stream.Pair[string, int]{Key: stateKey(r), Value: 1}
		})
		completed := 0
		mapped, _ := stream.MapWithState(pairs, func(_ string, v int, st *stream.State[int]) (int, bool) {
			if !st.IsTimingOut() {
				st.Update(v)
			}
			return 0, false
		}, stream.StateTimeout(time.Minute+time.Second))
		stream.ForEachBatch(mapped, func(context.Context, *batch.Batch[int]) error { completed++; return nil })
		stream.ForEachBatch(stream.Window(pairs, time.Second, time.Second), func(context.Context, *batch.Batch[stream.Pair[string, int]]) error {
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		if keys {
			time.Sleep(iv / 2)
			src.produce(d.record(), d.record(), d.record())
		}
		time.Sleep(batches*iv + iv/2)
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if completed < batches {
			t.Fatalf("%d batches completed, want %d: the test does not test", completed, batches)
		}
		// The reservations, the shape and the empty state's snapshot; with
		// keys, the block, the batches while the window holds the records
		// (allocations, completions) and a snapshot or two.
		most := int((batches*iv+10*time.Second-1)/(10*time.Second) + 2)
		if keys {
			most += 20
		}
		if len(*appended) > most {
			t.Errorf("%d batches of an idle stateful pipeline wrote %d log entries, want at most %d: %v", batches, len(*appended), most, *appended)
		}
	})
}

// TestStateRecoveryIdle is TestStateRecovery with bursts of records between
// idle periods long enough for every operator to come to hold no state, and
// crashes where the log of those idle batches changed: every operator's
// output at every batch time, in any run, must be what a run never
// interrupted computes from the batches before it. Without an output of
// MapWithState's snapshots and with a timeout longer than the windows,
// MapWithState is quiet while its keys wait for their timeout.
func TestStateRecoveryIdle(t *testing.T) {
	for _, o := range []stateOpts{{timeout: stateTimeout}, {noSnaps: true, timeout: 10 * time.Second}} {
		for _, tc := range idleCrashes() {
			t.Run(fmt.Sprintf("%s, snapshots %t", tc.name, !o.noSnaps), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { testStateRecoveryIdle(t, tc, o) })
			})
		}
	}
}

func idleCrashes() []stateCrash {
	return []stateCrash{
		{"crash at a reservation", func(d *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			d.log.SetAppendHook(nthAppend(recoverylog.KindBatchesReserved, 3, 0, stop))
			return nil
		}},
		{"reservation appended, crash", func(d *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			d.log.SetAppendHook(nthAppend(recoverylog.KindBatchesReserved, 2, 1, stop))
			return nil
		}},
		{"stop in a quiet batch's output", func(_ *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			empty := 0
			return func(ctx context.Context, b *batch.Batch[string]) error {
				if b.Len() == 0 {
					if empty++; empty == 40 {
						stop()
						return ctx.Err()
					}
				}
				return nil
			}
		}},
		{"crash at a run of empty batches", func(d *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			d.log.SetAppendHook(nthAppend(recoverylog.KindEmptyRun, 3, 0, stop))
			return nil
		}},
		{"run of empty batches appended, crash", func(d *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			d.log.SetAppendHook(nthAppend(recoverylog.KindEmptyRun, 2, 1, stop))
			return nil
		}},
	}
}

func testStateRecoveryIdle(t *testing.T, tc stateCrash, o stateOpts) {
	d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
	seen := newStateSeen()
	var p1 *stream.Pipeline
	hook := tc.setup(d, func() { p1.Stop() })
	p1, src1 := statePipelineOf(t, d, seen, hook, o)
	errc := make(chan error, 1)
	go func() { errc <- p1.Run(t.Context()) }()
	time.Sleep(300 * time.Millisecond)
	if err := produceBursts(d, src1, errc); err != nil && !errors.Is(err, errCrash) {
		t.Fatalf("first Run: %v", err)
	}
	d.log.SetAppendHook(nil)
	st, err := recoverylog.Recover(d.log.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if st.ReservedThrough == 0 {
		t.Fatal("no batch times reserved: no quiet batch, the test does not test")
	}

	p2, src2 := statePipelineOf(t, d, seen, nil, o)
	go func() { errc <- p2.Run(t.Context()) }()
	time.Sleep(2 * time.Second) // idle first: what the state holds shows
	for range 2 {
		for range 4 {
			src2.produce(d.record(), d.record())
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(12 * time.Second)
	}
	p2.Drain(context.Background())
	if err := <-errc; err != nil {
		t.Fatalf("second Run: %v", err)
	}

	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.clash) > 0 {
		t.Errorf("batches run again with other records: %v", seen.clash)
	}
	checked := seen.checkTruth(o.timeout, func(_ batch.Time, format string, args ...any) { t.Errorf(format, args...) })
	if checked < 100 {
		t.Errorf("%d outputs checked: the test does not test", checked)
	}
}

// idleOutputs is what the state pipeline with keepCounts false outputs
// at a batch time.
type idleOutputs struct {
	counts, mws, window, windowN map[string]int
	win                          int
	timeout                      []string // sorted
}

// checkTruth compares the outputs seen, at every batch time they were
// seen at, with idleTruth's for a MapWithState timeout of timeout, calls
// report for each difference found at a time, and returns how many outputs
// it compared. The caller holds s.mu.
func (s *stateSeen) checkTruth(timeout time.Duration, report func(at batch.Time, format string, args ...any)) (checked int) {
	for at, want := range idleTruth(s.records, timeout) {
		for _, c := range []struct {
			name string
			got  map[batch.Time]map[string]int
			want map[string]int
		}{
			{"UpdateStateByKey", s.counts, want.counts},
			{"MapWithState", s.mws, want.mws},
			{"ReduceByKeyAndWindow with inverse", s.window, want.window},
			{"ReduceByKeyAndWindow without inverse", s.windowN, want.windowN},
		} {
			got, ok := c.got[at]
			if !ok {
				continue // not a slide, or the batch's outputs stopped before this one
			}
			checked++
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
				report(at, "%s at %v (-truth +got):\n%s", c.name, at, diff)
			}
		}
		if got, ok := s.win[at]; ok && got != want.win {
			report(at, "Window at %v: %d records, truth %d", at, got, want.win)
		}
		if got, ok := s.timeout[at]; ok && !slices.Equal(got, want.timeout) {
			report(at, "MapWithState timed out %v at %v, truth %v", got, at, want.timeout)
		}
	}
	return checked
}

// idleTruth computes, for every batch time of records, what the state
// pipeline with keepCounts false outputs at that time in a run never
// interrupted.
func idleTruth(records map[batch.Time][]string, timeout time.Duration) map[batch.Time]idleOutputs {
	out := map[batch.Time]idleOutputs{}
	counts, mws := map[string]int{}, map[string]int{}
	lastSeen := map[string]batch.Time{}
	times := slices.Sorted(maps.Keys(records))
	for _, t := range times {
		next := map[string]int{}
		for _, r := range records[t] {
			k := stateKey(r)
			next[k] = counts[k] + 1
			counts[k] = next[k]
			mws[k]++
			lastSeen[k] = t
		}
		counts = next
		var timedOut []string
		for k, l := range lastSeen {
			if t.Std().Sub(l.Std()) >= timeout {
				delete(mws, k)
				delete(lastSeen, k)
				timedOut = append(timedOut, k)
			}
		}
		slices.Sort(timedOut)
		o := idleOutputs{counts: maps.Clone(counts), mws: maps.Clone(mws), window: map[string]int{}, windowN: map[string]int{},
			timeout: timedOut}
		for _, u := range times {
			if u > t {
				break
			}
			for _, r := range records[u] {
				if u > t.Add(-3*time.Second) {
					o.window[stateKey(r)]++
				}
				if u > t.Add(-4*time.Second) {
					o.windowN[stateKey(r)]++
				}
				if u > t.Add(-2*time.Second) {
					o.win++
				}
			}
		}
		out[t] = o
	}
	return out
}

// ticks is the state of TestStateRecoveryEmptyRuns's UpdateStateByKey: the
// records of a key so far, and the batches the state was updated in since
// its first record, empty ones included, so that an empty batch applied
// twice or missed after a restart shows.
type ticks struct{ Records, Batches int }

// emptyRunCrash is a crash of TestStateRecoveryEmptyRuns's first run, in
// its idle time, which starts at the batch time idle holds: out, if set,
// is called by the output (n counting the empty batches of the idle time
// the output saw, this one included) and returns its result; appends, if
// set, is the recovery log's append hook.
type emptyRunCrash struct {
	name    string
	out     func(ctx context.Context, n int, stop func()) error
	appends func(idle *atomic.Int64, stop func()) recoverylog.AppendHook
	// again, if not 0, crashes the first restart too, in the output of the
	// again-th batch it runs: one the first crash left pending.
	again int
	// gap, if set, leaves a batch time without records between the second
	// and third batches with records, and makes the second one's output
	// slow: the timer cuts the empty batch and the third one, logging its
	// blocks, while the runner is still on the second, so the empty
	// batch's run is logged after the blocks of a later batch.
	gap bool
}

// emptyRunCrashIn returns an emptyRunCrash.out that stops the Run in the
// output of the at-th empty batch of the idle time.
func emptyRunCrashIn(at int) func(context.Context, int, func()) error {
	return func(ctx context.Context, n int, stop func()) error {
		if n == at {
			stop()
			return ctx.Err()
		}
		return nil
	}
}

func emptyRunCrashes() []emptyRunCrash {
	crashIn := emptyRunCrashIn
	return []emptyRunCrash{
		{name: "in the output of an empty batch of a run, then in its run again", out: crashIn(37), again: 3},
		{name: "at a run's entry after a later batch's blocks", gap: true, appends: func(_ *atomic.Int64, stop func()) recoverylog.AppendHook {
			return nthAppend(recoverylog.KindEmptyRun, 1, 0, stop)
		}},
		{name: "run's entry appended after a later batch's blocks, crash", gap: true, appends: func(_ *atomic.Int64, stop func()) recoverylog.AppendHook {
			return nthAppend(recoverylog.KindEmptyRun, 1, 1, stop)
		}},
		{name: "in the output of an empty batch of a run that holds a batch with records", gap: true, out: crashIn(1)},
		{name: "at a run's entry, then in its run again", again: 1, appends: func(_ *atomic.Int64, stop func()) recoverylog.AppendHook {
			return nthAppend(recoverylog.KindEmptyRun, 3, 0, stop)
		}},
		{name: "in the output of an empty batch of a run", out: crashIn(37)},
		{name: "in the output of a run's first empty batch", out: crashIn(51)},
		{name: "at a run's entry", appends: func(_ *atomic.Int64, stop func()) recoverylog.AppendHook {
			return nthAppend(recoverylog.KindEmptyRun, 3, 0, stop)
		}},
		{name: "run's entry appended, crash", appends: func(_ *atomic.Int64, stop func()) recoverylog.AppendHook {
			return nthAppend(recoverylog.KindEmptyRun, 2, 1, stop)
		}},
		{name: "after an idle snapshot", appends: func(idle *atomic.Int64, stop func()) recoverylog.AppendHook {
			return func(_ int, entries []recoverylog.Entry) recoverylog.Fault {
				if e := entries[0]; e.Kind == recoverylog.KindSnapshot && idle.Load() != 0 && int64(e.Time) > idle.Load() {
					stop()
					return recoverylog.Fault{Err: errCrash, Keep: 1}
				}
				return recoverylog.Fault{}
			}
		}},
	}
}

// TestStateRecoveryEmptyRuns crashes an idle pipeline whose
// UpdateStateByKey keeps its keys for ever, and whose state every empty
// batch moves, where its runs of empty batches are logged (one entry per
// 10 s, not two per batch), then restarts it, stops it gracefully while
// idle, and restarts it again: the state the output shows at each batch
// time must be what a run never interrupted computes from the batches run
// up to it, each applied once; a batch time shown twice shows the same
// state; only the batches the crash left pending run their outputs again,
// the interrupted one among them; and the idle time writes one run entry
// per 10 s, no allocation nor completion. It does so compacting the log
// as rarely as a pipeline does by default, and at every run.
func TestStateRecoveryEmptyRuns(t *testing.T) {
	for _, compactEvery := range []int{20, 1} {
		for _, tc := range emptyRunCrashes() {
			t.Run(fmt.Sprintf("%s, CompactEvery %d", tc.name, compactEvery), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { testStateRecoveryEmptyRuns(t, tc, compactEvery) })
			})
		}
	}
}

func testStateRecoveryEmptyRuns(t *testing.T, tc emptyRunCrash, compactEvery int) {
	const iv = 200 * time.Millisecond
	d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
	var (
		mu      sync.Mutex
		shown   = map[batch.Time]map[string]ticks{} // by batch time, the state the output saw
		records = map[batch.Time][]string{}         // by batch time, its records
		runs    = map[batch.Time]int{}              // how often the output ran at a batch time
		clash   []string
		idle    atomic.Int64 // the batch time from which the first run is idle, once it is
		empty   int          // the empty batches of the idle time the first run's output saw
	)
	build := func(out func(context.Context, int, func()) error, stop func(), slow bool) (*stream.Pipeline, *replay) {
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: d.log, CompactEvery: compactEvery,
			StateSnapshotInterval: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		src := newReplay(t, d)
		recs := stream.From(p, src)
		full := 0 // batches with records
		stream.ForEachBatch(recs, func(_ context.Context, b *batch.Batch[string]) error {
			mu.Lock()
			records[b.Time()] = slices.Collect(b.All())
			mu.Unlock()
			if b.Len() > 0 {
				if full++; slow && full == 2 {
					time.Sleep(3 * iv)
				}
			}
			return nil
		})
		pairs := stream.Map(recs, func(r string) stream.Pair[string, int] {
			return stream.Pair[string, int]{Key: stateKey(r), Value: 1}
		})
		st := stream.UpdateStateByKey(pairs, func(_ string, vs []int, st ticks, _ bool) (ticks, bool) {
			return ticks{Records: st.Records + len(vs), Batches: st.Batches + 1}, true
		})
		stream.ForEachBatch(st, func(ctx context.Context, b *batch.Batch[stream.Pair[string, ticks]]) error {
			m := map[string]ticks{}
			for kv := range b.All() {
				m[kv.Key] = kv.Value
			}
			mu.Lock()
			if old, ok := shown[b.Time()]; ok && !cmp.Equal(old, m) {
				clash = append(clash, fmt.Sprintf("%v: %v, then %v", b.Time(), old, m))
			}
			shown[b.Time()] = m
			runs[b.Time()]++
			n := 0
			if from := idle.Load(); from != 0 && int64(b.Time()) >= from {
				empty++
				n = empty
			}
			mu.Unlock()
			if out != nil && n > 0 {
				return out(ctx, n, stop)
			}
			return nil
		})
		return p, src
	}

	var p1 *stream.Pipeline
	crash := func() {
		d.log.Freeze(errCrash) // the process dies: nothing more is written
		p1.Stop()
	}
	var appended []recoverylog.Entry
	var hook recoverylog.AppendHook
	if tc.appends != nil {
		hook = tc.appends(&idle, func() { p1.Stop() })
	}
	d.log.SetAppendHook(func(n int, entries []recoverylog.Entry) recoverylog.Fault {
		if idle.Load() != 0 {
			appended = append(appended, entries...)
		}
		if hook != nil {
			return hook(n, entries)
		}
		return recoverylog.Fault{}
	})
	p1, src1 := build(tc.out, crash, tc.gap)
	errc := make(chan error, 1)
	go func() { errc <- p1.Run(t.Context()) }()
	time.Sleep(iv / 2)
	for i := range 3 {
		src1.produce(d.record(), d.record(), d.record())
		time.Sleep(iv)
		if tc.gap && i == 1 {
			time.Sleep(iv)
		}
	}
	idle.Store(int64(batch.TimeOf(time.Now()).Add(iv)))
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, errCrash) {
			t.Fatalf("first Run: %v", err)
		}
	case <-time.After(21 * time.Minute):
		t.Fatal("no crash in 21 minutes idle (an idle snapshot is due every 20): the test does not test")
	}
	d.log.SetAppendHook(nil)
	d.log.Freeze(nil)
	st, err := recoverylog.Recover(d.log.Entries())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if most := empty*int(iv)/int(10*time.Second) + 2; countKind(appended, recoverylog.KindEmptyRun) > most {
		t.Errorf("%d idle batches wrote %d runs of empty batches, want at most %d: %v",
			empty, countKind(appended, recoverylog.KindEmptyRun), most, appended)
	}
	most := 1 // of a batch cut before
	if tc.gap {
		most = 2 // the slow batch's, and the batch after the gap's
	}
	if n := countKind(appended, recoverylog.KindBatchCompleted) + countKind(appended, recoverylog.KindBatchAllocated); n > most {
		t.Errorf("%d idle batches wrote %d allocations and completions, want at most %d (of batches cut before): %v", empty, n, most, appended)
	}
	mu.Unlock()
	pending := map[batch.Time]bool{}
	for _, p := range st.Pending {
		pending[p.Time] = true
	}

	if tc.again != 0 {
		// Crash the restart too, as it runs the pending batches again.
		mu.Lock()
		at := empty + tc.again
		mu.Unlock()
		var p *stream.Pipeline
		p, _ = build(emptyRunCrashIn(at), func() {
			d.log.Freeze(errCrash)
			p.Stop()
		}, false)
		go func() { errc <- p.Run(t.Context()) }()
		select {
		case err := <-errc:
			if err != nil && !errors.Is(err, errCrash) {
				t.Fatalf("first restart: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the first restart did not crash in a minute: the test does not test")
		}
		d.log.Freeze(nil)
	}

	// Restart, idle, stop gracefully while idle, restart, and drain after
	// more records.
	for i := range 2 {
		p, src := build(nil, nil, false)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(13 * time.Second)
		if i == 1 {
			src.produce(d.record(), d.record())
			time.Sleep(3 * iv)
		}
		if err := p.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Run %d after the crash: %v", i+1, err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(clash) > 0 {
		t.Errorf("batch times shown again with another state: %v", clash)
	}
	again := false
	for bt, n := range runs {
		if n > 1 && !pending[bt] {
			t.Errorf("the output of batch %v ran %d times; it was not pending after the crash", bt, n)
		}
		again = again || n > 1
	}
	if tc.out != nil && !again {
		t.Errorf("no batch ran its output again: the one the crash interrupted did not complete")
	}
	// The truth: at each batch time, each key's records up to it, and the
	// batch times from its first record's up to it, each applied once.
	times := slices.Sorted(maps.Keys(shown))
	got := map[string]int{}
	first := map[string]int{} // by key, the index in times of its first record's batch
	for i, bt := range times {
		for _, r := range records[bt] {
			k := stateKey(r)
			got[k]++
			if _, ok := first[k]; !ok {
				first[k] = i
			}
		}
		want := map[string]ticks{}
		for k, f := range first {
			want[k] = ticks{Records: got[k], Batches: i - f + 1}
		}
		if diff := cmp.Diff(want, shown[bt], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("state at %v (-truth +shown):\n%s", bt, diff)
		}
	}
	total := 0
	for _, n := range got {
		total += n
	}
	if produced := len(slices.Concat(d.calls...)); total != produced {
		t.Errorf("the batches hold %d records, %d were produced", total, produced)
	}
	if len(times) < 130 {
		t.Errorf("%d batch times shown: the test does not test", len(times))
	}
}

func countKind(entries []recoverylog.Entry, k recoverylog.Kind) int {
	n := 0
	for _, e := range entries {
		if e.Kind == k {
			n++
		}
	}
	return n
}
