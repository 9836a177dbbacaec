package stream_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
		{"crash at an empty batch's allocation", func(d *durable, stop func()) func(context.Context, *batch.Batch[string]) error {
			n := 0
			d.log.SetAppendHook(func(_ int, entries []recoverylog.Entry) recoverylog.Fault {
				if e := entries[0]; e.Kind == recoverylog.KindBatchAllocated && len(e.Blocks) == 0 {
					if n++; n == 9 {
						stop()
						return recoverylog.Fault{Err: errCrash}
					}
				}
				return recoverylog.Fault{}
			})
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
	checked := 0
	for at, want := range idleTruth(seen.records, o.timeout) {
		for _, c := range []struct {
			name string
			got  map[batch.Time]map[string]int
			want map[string]int
		}{
			{"UpdateStateByKey", seen.counts, want.counts},
			{"MapWithState", seen.mws, want.mws},
			{"ReduceByKeyAndWindow with inverse", seen.window, want.window},
			{"ReduceByKeyAndWindow without inverse", seen.windowN, want.windowN},
		} {
			got, ok := c.got[at]
			if !ok {
				continue // not a slide, or the batch's outputs stopped before this one
			}
			checked++
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s at %v (-truth +got):\n%s", c.name, at, diff)
			}
		}
		if got, ok := seen.win[at]; ok && got != want.win {
			t.Errorf("Window at %v: %d records, truth %d", at, got, want.win)
		}
		if got, ok := seen.timeout[at]; ok && !slices.Equal(got, want.timeout) {
			t.Errorf("MapWithState timed out %v at %v, truth %v", got, at, want.timeout)
		}
	}
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
