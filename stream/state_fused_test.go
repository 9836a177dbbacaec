package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// shardedPipeline returns a Pipeline with batches of iv, Parallelism 4, and
// a memory source of shards shards.
func shardedPipeline(t *testing.T, iv time.Duration, shards int) (*stream.Pipeline, *memory.Source[string]) {
	t.Helper()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Parallelism: 4})
	if err != nil {
		t.Fatal(err)
	}
	src, err := memory.New[string](memory.Config{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	return p, src
}

// TestStateAfterFusedOperators runs UpdateStateByKey and MapWithState on
// the records of several shards through Map, Filter and FlatMap, which
// pass reused buffers to the states' map tasks, the Filter last or the
// Map last, with Parallelism 4, and
// checks every batch of both against one loop over the source's batch as
// ForEachBatch sees it.
func TestStateAfterFusedOperators(t *testing.T) {
	for _, mapLast := range []bool{false, true} {
		name := "Filter last"
		if mapLast {
			name = "Map last"
		}
		t.Run(name, func(t *testing.T) { testStateAfterFusedOperators(t, mapLast) })
	}
}

func testStateAfterFusedOperators(t *testing.T, mapLast bool) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		p, src := shardedPipeline(t, iv, 5)
		s := stream.From(p, src)
		type pair = stream.Pair[string, string]
		split := func(line string) []string { return strings.Fields(line) }
		toPair := func(w string) pair { k, v, _ := strings.Cut(w, "="); return pair{Key: k, Value: v} }
		keep := func(kv pair) bool { return kv.Value != "x" }
		pairs := func() *stream.Stream[pair] {
			if mapLast {
				return stream.Map(stream.Filter(stream.FlatMap(s, split), func(w string) bool { return keep(toPair(w)) }), toPair)
			}
			return stream.Filter(stream.Map(stream.FlatMap(s, split), toPair), keep)
		}
		// UpdateStateByKey: the state is the values so far; "drop" drops
		// it, and a key with no value in a batch keeps it.
		update := func(_ string, vs []string, st string, _ bool) (string, bool) {
			for _, v := range vs {
				if v == "drop" {
					return "", false
				}
				st += v
			}
			return st, true
		}
		// MapWithState: "rm" removes the state, another value appends.
		f := func(k, v string, st *stream.State[string]) (string, bool) {
			if v == "rm" {
				st.Remove()
			} else {
				st.Update(st.Get() + v)
			}
			return k + ":" + st.Get(), true
		}
		var (
			keys    []string // UpdateStateByKey's keys, in order
			states  = map[string]string{}
			mstates = map[string]string{}
			wantUpd [][]pair
			wantMap [][]string
			gotUpd  [][]pair
			gotMap  [][]string
		)
		stream.ForEachBatch(s, func(_ context.Context, b *batch.Batch[string]) error {
			var recs []pair
			for line := range b.All() {
				for _, w := range split(line) {
					if kv := toPair(w); keep(kv) {
						recs = append(recs, kv)
					}
				}
			}
			vals := map[string][]string{}
			var news []string
			var mapped []string
			for _, kv := range recs {
				if _, ok := vals[kv.Key]; !ok {
					if _, held := states[kv.Key]; !held {
						news = append(news, kv.Key)
					}
				}
				vals[kv.Key] = append(vals[kv.Key], kv.Value)
				st := mstates[kv.Key]
				if kv.Value == "rm" {
					delete(mstates, kv.Key)
					st = ""
				} else {
					st += kv.Value
					mstates[kv.Key] = st
				}
				mapped = append(mapped, kv.Key+":"+st)
			}
			var want []pair
			kept := keys[:0:0]
			for _, k := range keys {
				if ns, ok := update(k, vals[k], states[k], true); ok {
					states[k] = ns
					kept = append(kept, k)
					want = append(want, pair{Key: k, Value: ns})
				} else {
					delete(states, k)
				}
			}
			keys = kept
			for _, k := range news {
				if ns, ok := update(k, vals[k], "", false); ok {
					states[k] = ns
					keys = append(keys, k)
					want = append(want, pair{Key: k, Value: ns})
				}
			}
			wantUpd, wantMap = append(wantUpd, want), append(wantMap, mapped)
			return nil
		})
		stream.ForEachBatch(stream.UpdateStateByKey(pairs(), update), func(_ context.Context, b *batch.Batch[pair]) error {
			gotUpd = append(gotUpd, b.Records())
			return nil
		})
		mapped, _ := stream.MapWithState(pairs(), f)
		stream.ForEachBatch(mapped, func(_ context.Context, b *batch.Batch[string]) error {
			gotMap = append(gotMap, b.Records())
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(iv / 2)
		for b := range 8 {
			for i := range 12 {
				var line []string
				for j := range 1 + (b*7+i*3)%9 {
					k := fmt.Sprintf("k%d", (b*5+i*11+j*13)%17)
					v := []string{"a", "b", "x", "rm", "drop", "c"}[(b+i+j*j)%6]
					line = append(line, k+"="+v)
				}
				if err := src.Push(strings.Join(line, " ")); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(iv)
		}
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range wantMap {
			n += len(m)
		}
		if n < 100 {
			t.Fatalf("%d records in %d batches: the test feeds too few", n, len(wantMap))
		}
		if diff := cmp.Diff(wantUpd, gotUpd, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("UpdateStateByKey batches (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantMap, gotMap, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("MapWithState batches (-want +got):\n%s", diff)
		}
	})
}

// TestStatePanicsFailTheBatch checks that a panic in a function that runs
// in the map tasks of UpdateStateByKey and MapWithState (a Map before
// them), or in their own function, fails the batch with a *BatchError
// holding the panic, with several partitions run in parallel, and an
// output with Quarantine: a state operator's failure is not pinned to
// records, so nothing is quarantined.
func TestStatePanicsFailTheBatch(t *testing.T) {
	type pair = stream.Pair[string, int]
	boom := func(where string) func(w string) {
		return func(w string) {
			if w == "boom" {
				panic(where)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		build func(s *stream.Stream[string], dead stream.DeadLetters)
	}{{
		name: "Map before UpdateStateByKey",
		build: func(s *stream.Stream[string], dead stream.DeadLetters) {
			pairs := stream.Map(s, func(w string) pair { boom("map")(w); return pair{Key: w, Value: 1} })
			stream.ForEach(stream.UpdateStateByKey(pairs, func(_ string, vs []int, st int, _ bool) (int, bool) { return st + len(vs), true }),
				func(context.Context, pair) error { return nil }, stream.Retry(0), stream.Quarantine(dead))
		},
	}, {
		name: "UpdateStateByKey",
		build: func(s *stream.Stream[string], dead stream.DeadLetters) {
			pairs := stream.Map(s, func(w string) pair { return pair{Key: w, Value: 1} })
			stream.ForEach(stream.UpdateStateByKey(pairs, func(k string, vs []int, st int, _ bool) (int, bool) {
				boom("update")(k)
				return st + len(vs), true
			}), func(context.Context, pair) error { return nil }, stream.Retry(0), stream.Quarantine(dead))
		},
	}, {
		name: "Map before MapWithState",
		build: func(s *stream.Stream[string], dead stream.DeadLetters) {
			pairs := stream.Map(s, func(w string) pair { boom("map")(w); return pair{Key: w, Value: 1} })
			mapped, _ := stream.MapWithState(pairs, func(k string, v int, st *stream.State[int]) (int, bool) { return v, true })
			stream.ForEach(mapped, func(context.Context, int) error { return nil }, stream.Retry(0), stream.Quarantine(dead))
		},
	}, {
		name: "MapWithState",
		build: func(s *stream.Stream[string], dead stream.DeadLetters) {
			pairs := stream.Map(s, func(w string) pair { return pair{Key: w, Value: 1} })
			mapped, _ := stream.MapWithState(pairs, func(k string, v int, st *stream.State[int]) (int, bool) {
				boom("f")(k)
				return v, true
			})
			stream.ForEach(mapped, func(context.Context, int) error { return nil }, stream.Retry(0), stream.Quarantine(dead))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const iv = time.Second
				p, src := shardedPipeline(t, iv, 4)
				dead := &deadList{}
				tc.build(stream.From(p, src), dead)
				errc := make(chan error, 1)
				go func() { errc <- p.Run(t.Context()) }()
				time.Sleep(iv / 2)
				for _, recs := range [][]string{{"a", "b"}, {"c"}, {"d", "boom", "e"}, {"f"}} {
					if err := src.Push(recs...); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(2 * iv)
				p.Drain(context.Background())
				err := <-errc
				var be *stream.BatchError
				if !errors.As(err, &be) || be.Panic == nil {
					t.Fatalf("Run = %v, want a *BatchError holding the panic", err)
				}
				if len(dead.letters) != 0 {
					t.Errorf("%d records quarantined, want none: %+v", len(dead.letters), dead.letters)
				}
			})
		})
	}
}

// deadList keeps the letters quarantined.
type deadList struct{ letters []stream.DeadLetter }

func (d *deadList) Quarantine(_ context.Context, letters []stream.DeadLetter) error {
	d.letters = append(d.letters, letters...)
	return nil
}

// TestStatePanicInReplay checks that a panic in UpdateStateByKey's or
// MapWithState's function while a restarted pipeline replays the batches
// after its last state snapshot fails the Run with a *BatchError holding
// the panic, as in a batch run for the first time, and does not crash the
// process: the function may have changed since the batch first ran.
func TestStatePanicInReplay(t *testing.T) {
	type pair = stream.Pair[string, int]
	for _, op := range []string{"UpdateStateByKey", "MapWithState"} {
		t.Run(op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const iv = time.Second
				d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
				pipeline := func(panics bool) (*stream.Pipeline, *replay) {
					p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: d.log, StateSnapshotInterval: time.Hour, Parallelism: 2})
					if err != nil {
						t.Fatal(err)
					}
					src := newReplay(t, d)
					pairs := stream.Map(stream.From(p, src), func(w string) pair { return pair{Key: w, Value: 1} })
					check := func() {
						if panics {
							panic("changed function")
						}
					}
					if op == "UpdateStateByKey" {
						stream.ForEachBatch(stream.UpdateStateByKey(pairs, func(_ string, vs []int, st int, _ bool) (int, bool) {
							check()
							return st + len(vs), true
						}), func(context.Context, *batch.Batch[pair]) error { return nil })
					} else {
						mapped, _ := stream.MapWithState(pairs, func(_ string, v int, st *stream.State[int]) (int, bool) {
							check()
							st.Update(st.Get() + v)
							return v, true
						})
						stream.ForEachBatch(mapped, func(context.Context, *batch.Batch[int]) error { return nil })
					}
					return p, src
				}
				p1, src1 := pipeline(false)
				errc := make(chan error, 1)
				go func() { errc <- p1.Run(t.Context()) }()
				time.Sleep(iv / 2)
				src1.produce("a", "b")
				time.Sleep(3 * iv)
				p1.Stop()
				if err := <-errc; err != nil {
					t.Fatalf("first Run: %v", err)
				}
				st, err := recoverylog.Recover(d.log.Entries())
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Replay) == 0 {
					t.Fatalf("nothing to replay after the snapshot at %v: the test does not test", st.Snapshot)
				}
				p2, _ := pipeline(true)
				err = p2.Run(t.Context())
				var be *stream.BatchError
				if !errors.As(err, &be) || be.Panic == nil {
					t.Fatalf("Run replaying with a panicking function = %v, want a *BatchError holding the panic", err)
				}
			})
		})
	}
}
