package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestQuarantineBeforeKeyedOperators runs each keyed, window and state
// operator with Quarantine after a FlatMap and a Map, on four shards with
// Parallelism 4, where the Map panics on the word "boom": once on records
// holding it, once on the same records without them. Before, the first
// run stopped for good at the batch holding "boom" (a map task's panic,
// which no restart cures). Now each record holding "boom" is quarantined
// once, as read from its shard, with the panic, and none of its words is
// counted, even those the FlatMap made before it ("g" of "g boom"): the
// outputs of every batch are those of the run without them, and the Run
// ends without error.
func TestQuarantineBeforeKeyedOperators(t *testing.T) {
	type pair = stream.Pair[string, int64]
	one := func(w string) pair {
		if w == "boom" {
			panic("map: " + w)
		}
		return pair{Key: w, Value: 1}
	}
	plus := func(a, b int64) int64 { return a + b }
	minus := func(a, b int64) int64 { return a - b }
	// Each case builds its operator on the words, with opts, and an
	// output that appends each batch's records, formatted, to out.
	pairsOut := func(s *stream.Stream[pair], out *[]string) {
		stream.ForEachBatch(s, func(_ context.Context, b *batch.Batch[pair]) error {
			*out = append(*out, fmt.Sprint(b.Time(), b.Records()))
			return nil
		})
	}
	for _, tc := range []struct {
		name  string
		build func(words *stream.Stream[string], out *[]string, opts ...stream.Option)
	}{{
		"ReduceByKey", func(words *stream.Stream[string], out *[]string, opts ...stream.Option) {
			pairsOut(stream.ReduceByKey(stream.Map(words, one), plus, opts...), out)
		},
	}, {
		"CountByValue", func(words *stream.Stream[string], out *[]string, opts ...stream.Option) {
			keys := stream.Map(words, func(w string) string { return one(w).Key })
			stream.ForEachBatch(stream.CountByValue(keys, opts...), func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
				*out = append(*out, fmt.Sprint(b.Time(), b.Records()))
				return nil
			})
		},
	}, {
		"Window", func(words *stream.Stream[string], out *[]string, opts ...stream.Option) {
			win := stream.Window(stream.Map(words, func(w string) string { return one(w).Key }), 3*time.Second, time.Second, opts...)
			stream.ForEachBatch(win, func(_ context.Context, b *batch.Batch[string]) error {
				recs := b.Records()
				slices.Sort(recs) // the order of a window's parts follows blocks
				*out = append(*out, fmt.Sprint(b.Time(), recs))
				return nil
			})
		},
	}, {
		"ReduceByKeyAndWindow", func(words *stream.Stream[string], out *[]string, opts ...stream.Option) {
			pairsOut(stream.ReduceByKeyAndWindow(stream.Map(words, one), plus, minus, 3*time.Second, time.Second, opts...), out)
		},
	}, {
		"ReduceByKeyAndWindow without inverse", func(words *stream.Stream[string], out *[]string, opts ...stream.Option) {
			pairsOut(stream.ReduceByKeyAndWindow(stream.Map(words, one), plus, nil, 3*time.Second, time.Second, opts...), out)
		},
	}, {
		"UpdateStateByKey", func(words *stream.Stream[string], out *[]string, opts ...stream.Option) {
			pairsOut(stream.UpdateStateByKey(stream.Map(words, one), func(_ string, vs []int64, n int64, _ bool) (int64, bool) {
				return n + int64(len(vs)), true
			}, opts...), out)
		},
	}, {
		"MapWithState", func(words *stream.Stream[string], out *[]string, opts ...stream.Option) {
			mapped, _ := stream.MapWithState(stream.Map(words, one), func(k string, v int64, st *stream.State[int64]) (string, bool) {
				st.Update(st.Get() + v)
				return fmt.Sprintf("%s=%d", k, st.Get()), true
			}, opts...)
			stream.ForEachBatch(mapped, func(_ context.Context, b *batch.Batch[string]) error {
				*out = append(*out, fmt.Sprint(b.Time(), b.Records()))
				return nil
			})
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			batches := [][]string{{"a b", "c"}, {"d boom", "e"}, {"f", "g boom", "a"}, {"b c", "boom"}, {"d"}}
			clean := make([][]string, len(batches))
			for i, recs := range batches {
				clean[i] = slices.DeleteFunc(slices.Clone(recs), func(r string) bool { return strings.Contains(r, "boom") })
			}
			var counted []stream.OutputInfo // the Outputs of the batches completed, added up
			// run runs the pipeline on batches, the operator with Quarantine
			// if quarantine.
			run := func(batches [][]string, quarantine bool) ([]string, *deadList, error) {
				var out []string
				dead := &deadList{}
				var err error
				counted = nil
				synctest.Test(t, func(t *testing.T) {
					const iv = time.Second
					infos := make(chan stream.BatchInfo, 100)
					p, perr := stream.NewPipeline(stream.Config{BatchInterval: iv, Parallelism: 4, Listeners: []stream.Listener{completed{c: infos}}})
					if perr != nil {
						t.Fatal(perr)
					}
					src, perr := memory.New[string](memory.Config{Shards: 4})
					if perr != nil {
						t.Fatal(perr)
					}
					defer func() {
						for len(infos) > 0 {
							info := <-infos
							for len(counted) < len(info.Outputs) {
								counted = append(counted, stream.OutputInfo{})
							}
							for i, o := range info.Outputs {
								counted[i].Output = o.Output
								counted[i].Quarantined += o.Quarantined
							}
						}
					}()
					var opts []stream.Option
					if quarantine {
						opts = append(opts, stream.Quarantine(dead))
					}
					tc.build(stream.FlatMap(stream.From(p, src), strings.Fields), &out, opts...)
					errc := make(chan error, 1)
					go func() { errc <- p.Run(t.Context()) }()
					time.Sleep(iv / 2)
					for _, recs := range batches {
						if err := src.Push(recs...); err != nil {
							t.Fatal(err)
						}
						time.Sleep(iv)
					}
					time.Sleep(3 * iv)
					p.Drain(context.Background())
					err = <-errc
				})
				return out, dead, err
			}
			want, _, err := run(clean, false)
			if err != nil {
				t.Fatalf("Run on the records without boom: %v", err)
			}
			got, dead, err := run(batches, true)
			if err != nil {
				t.Fatalf("Run with Quarantine = %v, want nil: the records holding boom quarantined", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("outputs (-without the records holding boom +with them, quarantined):\n%s", diff)
			}
			var recs []string
			for _, l := range dead.letters {
				recs = append(recs, string(l.Record))
				if !strings.Contains(l.Err, "panic: map: boom") || l.Stack == "" || l.Range.Shard == "" || l.Range.First == "" ||
					!strings.Contains(l.OutputName, tc.name[:strings.IndexByte(tc.name+" ", ' ')]) || l.Output != 1 {
					t.Errorf("letter %+v: want the panic and its stack, the record's shard and range, the operator named, output 1 (after the pipeline's one output)", l)
				}
			}
			slices.Sort(recs)
			if diff := cmp.Diff([]string{"boom", "d boom", "g boom"}, recs); diff != "" {
				t.Errorf("records quarantined (-want +got):\n%s", diff)
			}
			if len(counted) != 2 || counted[0].Quarantined != 0 || counted[1].Quarantined != 3 || counted[1].Output != dead.letters[0].OutputName {
				t.Errorf("BatchInfo.Outputs added up: %+v; want the output with none quarantined, then the operator, named as its letters, with 3", counted)
			}
		})
	}
}

// letterSet keeps the letters quarantined by their place (batch time,
// output, index), and counts the calls.
type letterSet struct {
	m     map[string]stream.DeadLetter
	calls int
}

func (d *letterSet) Quarantine(_ context.Context, letters []stream.DeadLetter) error {
	d.calls++
	for _, l := range letters {
		d.m[fmt.Sprint(l.Time, "/", l.Output, "/", l.Index)] = l
	}
	return nil
}

// TestQuarantineBeforeStateRestored runs UpdateStateByKey and
// MapWithState with Quarantine after a Map that panics on "boom", stops,
// and runs the pipeline again with its recovery log: the restart rebuilds
// the state by replaying the batches after the last snapshot (here every
// batch), which leaves the record out again without sending its letter
// again (the batch completed once its letters were sent): the state after
// the restart is the one of a run never interrupted, and the record was
// quarantined once. The replay crashed (nil logger) before. A Transform
// with Quarantine before UpdateStateByKey, whose f panics on the batch
// holding "boom", has that batch's records left out again by the replay,
// their letters not sent again.
func TestQuarantineBeforeStateRestored(t *testing.T) {
	type pair = stream.Pair[string, int]
	one := func(w string) pair {
		if w == "boom" {
			panic("map: boom")
		}
		return pair{Key: w, Value: 1}
	}
	for _, tc := range []struct {
		op      string
		letters []string // the records quarantined
		state   []string // after the restart, sorted
	}{
		{"UpdateStateByKey", []string{"boom"}, []string{"a=3", "b=1", "c=1"}},
		{"MapWithState", []string{"boom"}, []string{"a=3", "b=1", "c=1"}},
		{"Transform", []string{"a", "b", "boom"}, []string{"A=2", "C=1"}},
	} {
		op := tc.op
		t.Run(op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const iv = time.Second
				d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
				dead := &letterSet{m: make(map[string]stream.DeadLetter)}
				var last []string // the last batch's output, formatted
				keepLast := func(_ context.Context, b *batch.Batch[pair]) error {
					last = last[:0]
					for kv := range b.All() {
						last = append(last, fmt.Sprintf("%s=%d", kv.Key, kv.Value))
					}
					slices.Sort(last)
					return nil
				}
				pipeline := func() (*stream.Pipeline, *replay) {
					p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: d.log, StateSnapshotInterval: time.Hour, Parallelism: 2})
					if err != nil {
						t.Fatal(err)
					}
					src := newReplay(t, d)
					words := stream.From(p, src)
					pairs := stream.Map(words, one)
					if op == "Transform" {
						upper := stream.Transform(words, upperUnlessBoom, stream.Quarantine(dead))
						pairs = stream.Map(upper, func(w string) pair { return pair{Key: w, Value: 1} })
					}
					if op != "MapWithState" {
						stream.ForEachBatch(stream.UpdateStateByKey(pairs, func(_ string, vs []int, st int, _ bool) (int, bool) {
							return st + len(vs), true
						}, stream.Quarantine(dead)), keepLast)
					} else {
						_, snaps := stream.MapWithState(pairs, func(_ string, v int, st *stream.State[int]) (int, bool) {
							st.Update(st.Get() + v)
							return v, true
						}, stream.Quarantine(dead))
						stream.ForEachBatch(snaps, keepLast)
					}
					return p, src
				}
				p1, src1 := pipeline()
				errc := make(chan error, 1)
				go func() { errc <- p1.Run(t.Context()) }()
				time.Sleep(iv / 2)
				src1.produce("a", "boom", "b")
				time.Sleep(iv)
				src1.produce("a")
				time.Sleep(2 * iv)
				p1.Stop()
				if err := <-errc; err != nil {
					t.Fatalf("first Run: %v", err)
				}
				// letters returns the records of the letters, sorted.
				letters := func() []string {
					var recs []string
					for _, l := range dead.m {
						recs = append(recs, string(l.Record))
					}
					slices.Sort(recs)
					return recs
				}
				if diff := cmp.Diff(tc.letters, letters()); diff != "" || dead.calls != 1 {
					t.Fatalf("first Run quarantined in %d calls, want 1, the records (-want +got):\n%s", dead.calls, diff)
				}
				st, err := recoverylog.Recover(d.log.Entries())
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Replay) == 0 {
					t.Fatalf("nothing to replay after the snapshot at %v: the test does not test", st.Snapshot)
				}
				p2, src2 := pipeline()
				go func() { errc <- p2.Run(t.Context()) }()
				time.Sleep(iv / 2)
				src2.produce("c", "a")
				time.Sleep(2 * iv)
				p2.Stop()
				if err := <-errc; err != nil {
					t.Fatalf("second Run: %v", err)
				}
				if diff := cmp.Diff(tc.letters, letters()); diff != "" || dead.calls != 1 {
					t.Errorf("after the restart, letters in %d calls, want the first Run's 1, not sent again by the replay; records (-want +got):\n%s", dead.calls, diff)
				}
				if diff := cmp.Diff(tc.state, last); diff != "" {
					t.Errorf("state after the restart (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestQuarantineSharedStreamBeforeKeyedOperator has a Map that panics on
// "boom" feed both a ForEach and, through another Map, a ReduceByKey, each
// with Quarantine of its own: the shared Map is computed once, before
// both, so its failure is no map task's. Both now plan it again fused into
// their own pass: each quarantines the record, the ReduceByKey counts the
// others, and the Run ends without error. Before, the ReduceByKey stopped
// the Run.
func TestQuarantineSharedStreamBeforeKeyedOperator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		p, src := shardedPipeline(t, iv, 2)
		events := stream.Map(stream.From(p, src), func(w string) string {
			if w == "boom" {
				panic("parse: boom")
			}
			return w
		})
		forEach, keyed := &deadList{}, &deadList{}
		stream.ForEach(events, func(context.Context, string) error { return nil }, stream.Retry(0), stream.Quarantine(forEach))
		pairs := stream.Map(events, func(w string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: w, Value: 1} })
		var counts []string
		stream.ForEachBatch(stream.ReduceByKey(pairs, func(a, b int) int { return a + b }, stream.Quarantine(keyed)),
			func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
				for kv := range b.All() {
					counts = append(counts, fmt.Sprintf("%s=%d", kv.Key, kv.Value))
				}
				return nil
			})
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(iv / 2)
		if err := src.Push("a", "boom", "a", "b"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * iv)
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v, want nil: boom quarantined by both consumers", err)
		}
		for name, d := range map[string]*deadList{"ForEach": forEach, "ReduceByKey": keyed} {
			if len(d.letters) != 1 || string(d.letters[0].Record) != "boom" || !strings.Contains(d.letters[0].Err, "parse: boom") {
				t.Errorf("%s quarantined %+v, want boom's letter", name, d.letters)
			}
		}
		slices.Sort(counts)
		if diff := cmp.Diff([]string{"a=2", "b=1"}, counts); diff != "" {
			t.Errorf("counts (-want +got):\n%s", diff)
		}
	})
}

// TestQuarantineStateFunctions has MapWithState's f and UpdateStateByKey's
// update, each with Quarantine, panic on the value "bad": f's record is
// quarantined and the key's state is as if the record never came;
// update's values of the key in the batch are quarantined and the key
// keeps the state it had. Before, either stopped Run for good. An update
// that panics on a key without values in the batch (no record to set
// aside) still fails the batch.
func TestQuarantineStateFunctions(t *testing.T) {
	type pair = stream.Pair[string, string]
	toPair := func(w string) pair { k, v, _ := strings.Cut(w, "="); return pair{Key: k, Value: v} }
	for _, tc := range []struct {
		name    string
		batches [][]string
		build   func(pairs *stream.Stream[pair], dead stream.DeadLetters, last *[]string)
		want    []string // the last batch's output
		letters []string // the records quarantined
		fails   bool     // Run fails: the panic has no record
	}{{
		name:    "MapWithState",
		batches: [][]string{{"a=1", "a=bad", "b=1"}, {"a=2", "b=bad"}},
		build: func(pairs *stream.Stream[pair], dead stream.DeadLetters, last *[]string) {
			_, snaps := stream.MapWithState(pairs, func(k, v string, st *stream.State[string]) (string, bool) {
				if v == "bad" {
					panic("f: bad value")
				}
				st.Update(st.Get() + v)
				return k, true
			}, stream.Quarantine(dead))
			stream.ForEachBatch(snaps, func(_ context.Context, b *batch.Batch[pair]) error {
				*last = (*last)[:0]
				for kv := range b.All() {
					*last = append(*last, kv.Key+"="+kv.Value)
				}
				return nil
			})
		},
		want:    []string{"a=12", "b=1"},
		letters: []string{`{"Key":"a","Value":"bad"}`, `{"Key":"b","Value":"bad"}`},
	}, {
		name:    "UpdateStateByKey",
		batches: [][]string{{"a=1", "b=1", "c=1"}, {"a=2", "b=2", "b=bad", "d=bad"}},
		build: func(pairs *stream.Stream[pair], dead stream.DeadLetters, last *[]string) {
			counts := stream.UpdateStateByKey(pairs, func(_ string, vs []string, st string, _ bool) (string, bool) {
				for _, v := range vs {
					if v == "bad" {
						panic("update: bad value")
					}
					st += v
				}
				return st, true
			}, stream.Quarantine(dead))
			stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[pair]) error {
				*last = (*last)[:0]
				for kv := range b.All() {
					*last = append(*last, kv.Key+"="+kv.Value)
				}
				return nil
			})
		},
		want:    []string{"a=12", "b=1", "c=1"},
		letters: []string{`{"Key":"b","Value":"2"}`, `{"Key":"b","Value":"bad"}`, `{"Key":"d","Value":"bad"}`},
	}, {
		name:    "UpdateStateByKey without values",
		batches: [][]string{{"a=1", "c=bad"}, {"a=2"}},
		build: func(pairs *stream.Stream[pair], dead stream.DeadLetters, _ *[]string) {
			stream.ForEachBatch(stream.UpdateStateByKey(pairs, func(k string, vs []string, st string, _ bool) (string, bool) {
				if k == "a" && len(vs) == 0 {
					panic("update: no values")
				}
				return st + strings.Join(vs, ""), true
			}, stream.Quarantine(dead)), func(context.Context, *batch.Batch[pair]) error { return nil })
		},
		fails: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const iv = time.Second
				p, src := shardedPipeline(t, iv, 1)
				dead := &deadList{}
				var last []string
				tc.build(stream.Map(stream.From(p, src), toPair), dead, &last)
				errc := make(chan error, 1)
				go func() { errc <- p.Run(t.Context()) }()
				time.Sleep(iv / 2)
				for _, recs := range tc.batches {
					if err := src.Push(recs...); err != nil {
						t.Fatal(err)
					}
					time.Sleep(iv)
				}
				if tc.fails {
					time.Sleep(iv)
				}
				p.Drain(context.Background())
				err := <-errc
				if tc.fails {
					var be *stream.BatchError
					if !errors.As(err, &be) || be.Panic == nil {
						t.Fatalf("Run = %v, want a *BatchError holding update's panic: no record to set aside", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Run = %v, want nil: the bad values quarantined", err)
				}
				slices.Sort(last)
				if diff := cmp.Diff(tc.want, last); diff != "" {
					t.Errorf("state after the last batch (-want +got):\n%s", diff)
				}
				var recs []string
				for _, l := range dead.letters {
					recs = append(recs, string(l.Record))
					if !strings.Contains(l.Err, "panic: ") || l.Stack == "" || !strings.HasPrefix(l.OutputName, tc.name) || l.Output != 1 {
						t.Errorf("letter %+v: want the panic and its stack, the operator, output 1", l)
					}
				}
				slices.Sort(recs)
				if diff := cmp.Diff(tc.letters, recs); diff != "" {
					t.Errorf("records quarantined (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// failingLetters is a DeadLetters that refuses every letter.
type failingLetters struct{}

func (failingLetters) Quarantine(context.Context, []stream.DeadLetter) error {
	return errors.New("dead letters unavailable")
}

// TestQuarantineBeforeKeyedOperatorFails: when the operator's dead letters
// refuse its letters, the batch fails and Run stops, naming the operator
// and the dead letters' error: a record is never dropped without its
// letter.
func TestQuarantineBeforeKeyedOperatorFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		p, src := shardedPipeline(t, iv, 1)
		pairs := stream.Map(stream.From(p, src), func(w string) stream.Pair[string, int] {
			if w == "boom" {
				panic("map: boom")
			}
			return stream.Pair[string, int]{Key: w, Value: 1}
		})
		stream.ForEachBatch(stream.ReduceByKey(pairs, func(a, b int) int { return a + b }, stream.Quarantine(failingLetters{})),
			func(context.Context, *batch.Batch[stream.Pair[string, int]]) error { return nil })
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(iv / 2)
		if err := src.Push("a", "boom"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * iv)
		p.Drain(context.Background())
		err := <-errc
		var be *stream.BatchError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "ReduceByKey (stream 2): quarantine 1 records: dead letters unavailable") {
			t.Fatalf("Run = %v, want a *BatchError naming the operator and the dead letters' error", err)
		}
	})
}
