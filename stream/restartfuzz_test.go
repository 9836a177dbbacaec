package stream_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/stream"
)

// offsetClock is the wall clock moved by off: a machine whose clock is
// ahead (off > 0) or behind.
type offsetClock struct {
	clock.Real
	off time.Duration
}

// Now implements clock.Clock.
func (c offsetClock) Now() time.Time { return time.Now().Add(c.off) }

// fuzzSeen is what every Run's outputs saw, by batch time.
type fuzzSeen struct {
	stateSeen
	shown  map[string]map[batch.Time]string // by output: canonical content
	win10  map[batch.Time]map[string]bool   // tumbling 10 s window: its records
	order  []string                         // out-of-order batch times within a Run
	outRun map[batch.Time][]int             // records output: the Runs that ran it
	run    int
	last   batch.Time // the records output's last batch time in this Run
}

// show notes that output out saw v at batch time t.
func (s *fuzzSeen) show(out string, t batch.Time, v string) {
	if s.shown[out] == nil {
		s.shown[out] = map[batch.Time]string{}
	}
	if old, ok := s.shown[out][t]; ok && old != v {
		s.clash = append(s.clash, fmt.Sprintf("%s at %v: run %v saw %q, then run %d %q", out, t, s.outRun[t], old, s.run, v))
	}
	s.shown[out][t] = v
}

// fuzzOpts are the settings a seed picks for every Run.
type fuzzOpts struct {
	compactEvery int
	snapEvery    time.Duration
	timeout      time.Duration
	noSnaps      bool
	maxPending   int
}

// fuzzPipeline builds a Run of the fuzzed pipeline on d.
func fuzzPipeline(t *testing.T, d *durable, seen *fuzzSeen, o fuzzOpts, off, slowRe time.Duration, lag func(time.Duration), hook func(ctx context.Context, b *batch.Batch[string]) error) (*stream.Pipeline, *replay) {
	t.Helper()
	cfg := stream.Config{BatchInterval: time.Second, Recovery: d.log, CompactEvery: o.compactEvery,
		StateSnapshotInterval: o.snapEvery, Clock: offsetClock{off: off}}
	if o.maxPending > 0 {
		cfg = stream.WithMaxPendingBatches(cfg, o.maxPending)
	}
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := newReplay(t, d)
	var rcv source.Receiver[string] = src
	if slowRe > 0 {
		rcv = &slowReplay{replay: src, d: slowRe, lag: lag}
	}
	s := stream.From(p, rcv)
	stream.ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
		recs := slices.Collect(b.All())
		seen.mu.Lock()
		if b.Time() <= seen.last {
			seen.order = append(seen.order, fmt.Sprintf("run %d: %v after %v", seen.run, b.Time(), seen.last))
		}
		seen.last = b.Time()
		seen.show("records", b.Time(), fmt.Sprint(recs))
		seen.records[b.Time()] = recs
		seen.outRun[b.Time()] = append(seen.outRun[b.Time()], seen.run)
		seen.mu.Unlock()
		if hook != nil {
			return hook(ctx, b)
		}
		return nil
	}, stream.Named("records"))
	pairs := stream.Map(s, func(r string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: stateKey(r), Value: 1} })
	put := func(name string, m map[batch.Time]map[string]int) func(context.Context, *batch.Batch[stream.Pair[string, int]]) error {
		return func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
			seen.mu.Lock()
			defer seen.mu.Unlock()
			seen.show(name, b.Time(), fmt.Sprint(b.Records()))
			m[b.Time()] = pairsMap(b)
			return nil
		}
	}
	counts := stream.UpdateStateByKey(pairs, func(_ string, vs []int, st int, _ bool) (int, bool) {
		return st + len(vs), len(vs) > 0
	})
	stream.ForEachBatch(counts, put("counts", seen.counts), stream.Named("counts"))
	timedOut, snaps := stream.MapWithState(pairs, func(k string, v int, st *stream.State[int]) (string, bool) {
		if st.IsTimingOut() {
			return k, true
		}
		st.Update(st.Get() + v)
		return "", false
	}, stream.StateTimeout(o.timeout))
	if !o.noSnaps {
		stream.ForEachBatch(snaps, put("mws", seen.mws), stream.Named("mws"))
	}
	stream.ForEachBatch(timedOut, func(_ context.Context, b *batch.Batch[string]) error {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		seen.show("timeouts", b.Time(), fmt.Sprint(b.Records()))
		seen.timeout[b.Time()] = slices.Sorted(b.All())
		return nil
	}, stream.Named("timeouts"))
	sum := func(a, b int) int { return a + b }
	sub := func(a, b int) int { return a - b }
	stream.ForEachBatch(stream.ReduceByKeyAndWindow(pairs, sum, sub, 3*time.Second, time.Second), put("window", seen.window), stream.Named("window"))
	stream.ForEachBatch(stream.ReduceByKeyAndWindow(pairs, sum, nil, 4*time.Second, 2*time.Second), put("windowN", seen.windowN), stream.Named("windowN"))
	stream.ForEachBatch(stream.Window(s, 2*time.Second, time.Second), func(_ context.Context, b *batch.Batch[string]) error {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		seen.show("win", b.Time(), fmt.Sprint(b.Records()))
		seen.win[b.Time()] = b.Len()
		return nil
	}, stream.Named("win"))
	stream.ForEachBatch(stream.Window(s, 10*time.Second, 10*time.Second), func(_ context.Context, b *batch.Batch[string]) error {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		seen.show("win10", b.Time(), fmt.Sprint(slices.Sorted(b.All())))
		m := map[string]bool{}
		for r := range b.All() {
			m[r] = true
		}
		seen.win10[b.Time()] = m
		return nil
	}, stream.Named("win10"))
	return p, src
}

// runSpan is one Run's life on its own clock.
type runSpan struct {
	start, end time.Time
	how        string
	// past is the latest time earlier Runs reached, on their clocks or
	// in the batch times they ran.
	past time.Time
	// lag is when the Run's slow output ended, if it had one.
	lag time.Time
}

// TestRestartFuzz runs a state pipeline through random sequences of
// idle stretches, bursts, deaths (the log frozen), Stops, Drains, crashes
// at log appends and in outputs, restarts at once or later and with a
// clock behind or ahead, with random CompactEvery, StateSnapshotInterval
// and MapWithState timeouts. It checks G2 (a batch time shows the same
// content in every Run), every operator against a run never interrupted
// of the batches that ran, batch order within a Run, and that no record is
// lost from a 10 s window whose time some Run was up for (and, on its
// clock, before every earlier Run's progress, and after any slow output or
// Recompute of its own ended). Some Runs have a slow output, some a slow
// first Recompute, unless WEIR_RESTART_FUZZ_NOSLOW=1. WEIR_RESTART_FUZZ_SEEDS
// (200), WEIR_RESTART_FUZZ_SEED0 (0), WEIR_RESTART_FUZZ_DEBUG=1 (the log and
// batches). Written by a review of the restart's empty batches
// (emptyJobs); with the slow Runs it found the batch timer of a restart
// with state skipping the times a slow recomputation held it past (about
// 20 of 1,500 sequences lost a window's record).
func TestRestartFuzz(t *testing.T) {
	n := 200
	if s := os.Getenv("WEIR_RESTART_FUZZ_SEEDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	first := 0
	if s := os.Getenv("WEIR_RESTART_FUZZ_SEED0"); s != "" {
		first, _ = strconv.Atoi(s)
	}
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { fuzzReserved(t, uint64(seed)) })
		})
	}
}

// fuzzReserved runs the sequence of Runs seed picks and checks them.
func fuzzReserved(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	pick := func(xs ...time.Duration) time.Duration { return xs[rng.IntN(len(xs))] }
	o := fuzzOpts{
		compactEvery: []int{1, 2, 3, 20}[rng.IntN(4)],
		snapEvery:    pick(time.Second, 3*time.Second, 20*time.Second),
		timeout:      pick(3*time.Second, 10*time.Second),
		noSnaps:      rng.IntN(2) == 0,
		maxPending:   []int{0, 0, 1, 2}[rng.IntN(4)],
	}
	d := &durable{log: recoverylog.NewMemory()}
	seen := &fuzzSeen{stateSeen: *newStateSeen(), shown: map[string]map[batch.Time]string{}, win10: map[batch.Time]map[string]bool{},
		outRun: map[batch.Time][]int{}}
	var spans []runSpan
	var plan []string
	runs := 3 + rng.IntN(5)
	time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
	for i := range runs {
		final := i == runs-1
		off := time.Duration(0)
		switch rng.IntN(6) {
		case 0:
			off = -time.Duration(1+rng.IntN(8)) * time.Second
		case 1:
			off = time.Duration(1+rng.IntN(8)) * time.Second
		}
		clk := offsetClock{off: off}
		how := []string{"die", "stop", "drain", "die in output", "append fault", "die at kth"}[rng.IntN(6)]
		kth := 1 + rng.IntN(12)
		if final {
			how = "final drain"
		}
		life := time.Duration(500+rng.IntN(25000)) * time.Millisecond
		var p *stream.Pipeline
		var ended time.Time
		var once sync.Once
		die := func() {
			once.Do(func() {
				ended = clk.Now()
				d.log.Freeze(errors.New("the process died"))
				p.Stop()
			})
		}
		var hook func(ctx context.Context, b *batch.Batch[string]) error
		var slowAt time.Time
		var slow time.Duration
		if os.Getenv("WEIR_RESTART_FUZZ_NOSLOW") == "" && rng.IntN(3) == 0 {
			slowAt = time.Now().Add(time.Duration(rng.IntN(int(life/time.Millisecond))) * time.Millisecond)
			slow = time.Duration(1000+rng.IntN(6000)) * time.Millisecond
		}
		dieAt := time.Now().Add(life)
		var lagEnd time.Time
		hook = func(ctx context.Context, b *batch.Batch[string]) error {
			if slow > 0 && time.Now().After(slowAt) {
				d := slow
				slow = 0
				lagEnd = clk.Now().Add(d)
				time.Sleep(d)
			}
			if kth--; how == "die at kth" && kth == 0 {
				die()
				return ctx.Err()
			}
			if how == "die in output" && time.Now().After(dieAt) {
				die()
				return ctx.Err()
			}
			return nil
		}
		if how == "append fault" {
			kinds := []recoverylog.Kind{recoverylog.KindBatchesReserved, recoverylog.KindEmptyRun, recoverylog.KindSnapshot, recoverylog.KindBatchCompleted, recoverylog.KindBlockStored}
			k := kinds[rng.IntN(len(kinds))]
			d.log.SetAppendHook(nthAppend(k, 1+rng.IntN(4), rng.IntN(2), func() {
				once.Do(func() { ended = clk.Now(); go p.Stop() })
			}))
		}
		seen.mu.Lock()
		seen.run, seen.last = i, 0
		var past time.Time
		for _, sp := range spans {
			past = maxTime(past, sp.end)
		}
		for bt := range seen.records {
			past = maxTime(past, bt.Std())
		}
		seen.mu.Unlock()
		var src *replay
		if os.Getenv("WEIR_RESTART_FUZZ_DEBUG") != "" {
			st, _ := recoverylog.Recover(d.log.Entries())
			t.Logf("before run %d (clock %v, wall %v): last completed %v, pending %v, reserved %v, snapshot %v", i, off, time.Now().Format("04:05.000"),
				st.LastCompleted.Std().Format("04:05.000"), pendingTimes(st), st.ReservedThrough.Std().Format("04:05.000"), st.Snapshot)
		}
		var slowRe time.Duration
		if os.Getenv("WEIR_RESTART_FUZZ_NOSLOW") == "" && rng.IntN(2) == 0 {
			slowRe = time.Duration(500+rng.IntN(4000)) * time.Millisecond
		}
		var lagMu sync.Mutex
		p, src = fuzzPipeline(t, d, seen, o, off, slowRe, func(d time.Duration) {
			lagMu.Lock()
			defer lagMu.Unlock()
			lagEnd = maxTime(lagEnd, clk.Now().Add(d))
		}, hook)

		start := clk.Now()
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		done := false
		var err error
		deadline := time.Now().Add(life)
		for !done && time.Now().Before(deadline) {
			idle := time.Duration(200+rng.IntN(13000)) * time.Millisecond
			select {
			case err = <-errc:
				done = true
				continue
			case <-time.After(min(idle, time.Until(deadline))):
			}
			if !time.Now().Before(deadline) {
				break
			}
			for range 1 + rng.IntN(4) {
				src.produce(d.record(), d.record())
				time.Sleep(100 * time.Millisecond)
			}
		}
		if final {
			time.Sleep(35 * time.Second)
		}
		if !done {
			switch how {
			case "die", "die in output", "append fault", "die at kth":
				die()
			case "stop":
				ended = clk.Now()
				p.Stop()
			case "drain", "final drain":
				ended = clk.Now()
				p.Drain(context.Background())
			}
			err = <-errc
		}
		if ended.IsZero() {
			ended = clk.Now()
		}
		d.log.SetAppendHook(nil)
		d.log.Freeze(nil)
		if err != nil && !errors.Is(err, errCrash) && !errors.Is(err, context.Canceled) {
			t.Logf("run %d (%s): %v", i, how, err)
		}
		spans = append(spans, runSpan{start: start, end: ended, how: how, past: past, lag: lagEnd})
		plan = append(plan, fmt.Sprintf("run %d: clock %+v, %s, up %v..%v, slow at %v", i, off, how, start.Format("04:05.000"), ended.Format("04:05.000"), slowAt.Format("04:05.000")))
		if !final && rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.IntN(15000)) * time.Millisecond)
		}
	}

	seen.mu.Lock()
	defer seen.mu.Unlock()
	fail := false
	report := func(format string, args ...any) {
		if !fail {
			t.Logf("opts %+v", o)
			for _, l := range plan {
				t.Log(l)
			}
		}
		fail = true
		t.Errorf(format, args...)
	}
	if os.Getenv("WEIR_RESTART_FUZZ_DEBUG") != "" {
		for _, bt := range slices.Sorted(maps.Keys(seen.outRun)) {
			t.Logf("batch %s: runs %v, records %v, win10 %v", bt.Std().Format("04:05"), seen.outRun[bt], seen.records[bt], len(seen.win10[bt]))
		}
	}
	for _, c := range seen.clash {
		report("G2: %s", c)
	}
	for _, c := range seen.order {
		report("order: %s", c)
	}
	seen.checkTruth(o.timeout, func(at batch.Time, format string, args ...any) {
		report(format+" (runs %v)", append(args, seen.outRun[at])...)
	})
	// Records lost from the 10 s window whose time a Run was up for.
	for _, bt := range slices.Sorted(maps.Keys(seen.records)) {
		ms := int64(bt)
		w := batch.Time((ms + 9999) / 10000 * 10000)
		for _, r := range seen.records[bt] {
			if seen.win10[w][r] {
				continue
			}
			for i, s := range spans {
				if s.start.Before(w.Std()) && s.past.Before(w.Std()) && !s.end.Before(maxTime(w.Std(), s.lag).Add(2*time.Second)) {
					report("record %s of batch %v is in no output of the window at %v, though run %d (%s) was up from %v to %v", r, bt, w,
						i, s.how, s.start.Format("05.000"), s.end.Format("05.000"))
					break
				}
			}
		}
	}
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// slowReplay is a replay whose first Recompute takes d more.
type slowReplay struct {
	*replay
	d     time.Duration
	slept atomic.Bool
	lag   func(time.Duration)
}

// Recompute implements source.Receiver, slowly the first time.
func (r *slowReplay) Recompute(ctx context.Context, info batch.BlockInfo) ([]string, error) {
	if r.slept.CompareAndSwap(false, true) {
		r.lag(r.d)
		time.Sleep(r.d)
	}
	return r.replay.Recompute(ctx, info)
}

// pendingTimes returns the times of st's pending batches, for the log.
func pendingTimes(st *recoverylog.State) []string {
	var out []string
	for _, p := range st.Pending {
		out = append(out, fmt.Sprintf("%s/%d/%t", p.Time.Std().Format("04:05"), len(p.Blocks), p.InRun))
	}
	return out
}
