package stream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestStatePanicErrorNamesKeyAndFix: a state operator's function that
// panics on a key, without Quarantine, fails the batch with an error that
// names the key and, for a record, its shard, and the fix (Quarantine, or,
// where no record is to blame, fixing the function), and that carries the
// panic (BatchError.Panic). Before, the error was only "UpdateStateByKey
// (stream 1): panic: boom". ReduceByKey's, which names the shard, is there
// to compare.
func TestStatePanicErrorNamesKeyAndFix(t *testing.T) {
	type pairs = *stream.Stream[stream.Pair[string, int]]
	keys := func(s *stream.Stream[stream.Pair[string, int]]) *stream.Stream[string] {
		return stream.Map(s, func(p stream.Pair[string, int]) string { return p.Key })
	}
	cases := []struct {
		name  string
		build func(s pairs) *stream.Stream[string]
		want  []string
	}{{
		name: "UpdateStateByKey",
		build: func(s pairs) *stream.Stream[string] {
			return keys(stream.UpdateStateByKey(s, func(k string, vs []int, st int, _ bool) (int, bool) {
				if k == "poison" {
					panic("boom")
				}
				return st + len(vs), true
			}))
		},
		want: []string{`on key "poison"`, "give UpdateStateByKey stream.Quarantine(d)"},
	}, {
		name: "UpdateStateByKey, a key without values",
		build: func(s pairs) *stream.Stream[string] {
			return keys(stream.UpdateStateByKey(s, func(k string, vs []int, st int, _ bool) (int, bool) {
				if k == "poison" && len(vs) == 0 {
					panic("boom")
				}
				return st + len(vs), true
			}, stream.Quarantine(printLetters{})))
		},
		want: []string{`on key "poison"`, "Quarantine cannot set it aside", "fix update"},
	}, {
		name: "MapWithState",
		build: func(s pairs) *stream.Stream[string] {
			m, _ := stream.MapWithState(s, func(k string, _ int, _ *stream.State[int]) (string, bool) {
				if k == "poison" {
					panic("boom")
				}
				return k, true
			})
			return m
		},
		want: []string{`on key "poison" (a record of shard shardId-000000000000)`, "give MapWithState stream.Quarantine(d)"},
	}, {
		name: "MapWithState, a key timing out",
		build: func(s pairs) *stream.Stream[string] {
			m, _ := stream.MapWithState(s, func(k string, v int, st *stream.State[int]) (string, bool) {
				if st.IsTimingOut() {
					if k == "poison" {
						panic("boom")
					}
					return k, false
				}
				st.Update(v)
				return k, true
			}, stream.StateTimeout(time.Second))
			return m
		},
		want: []string{`on key "poison"`, "timing out (StateTimeout)", "fix f"},
	}, {
		name: "ReduceByKey",
		build: func(s pairs) *stream.Stream[string] {
			return keys(stream.ReduceByKey(s, func(a, b int) int {
				if a == 7 || b == 7 {
					panic("boom")
				}
				return a + b
			}))
		},
		want: []string{"shard shardId-000000000000", "stream.Quarantine(d)"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src, err := memory.New[stream.Pair[string, int]](memory.Config{})
				if err != nil {
					t.Fatal(err)
				}
				if err := src.Push(stream.Pair[string, int]{Key: "a", Value: 1}, stream.Pair[string, int]{Key: "poison", Value: 1},
					stream.Pair[string, int]{Key: "poison", Value: 7}); err != nil {
					t.Fatal(err)
				}
				p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				stream.ForEach(tc.build(stream.From(p, src)), func(context.Context, string) error { return nil }, stream.Retry(0))
				err = p.Run(t.Context())
				var be *stream.BatchError
				if !errors.As(err, &be) {
					t.Fatalf("Run = %v, want a *BatchError", err)
				}
				if be.Panic != "boom" {
					t.Errorf("BatchError.Panic = %v, want boom", be.Panic)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Run = %v\ndoes not say %q", err, w)
					}
				}
			})
		})
	}
}
