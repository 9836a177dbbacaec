package stream

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
)

type kv = Pair[string, int]

// words splits each record into pairs (word, 1).
func wordPairs(s *Stream[string]) *Stream[kv] {
	return Map(FlatMap(s, strings.Fields), func(w string) kv { return kv{w, 1} })
}

func sum(a, b int) int { return a + b }
func sub(a, b int) int { return a - b }

func TestOperators(t *testing.T) {
	tests := []struct {
		name  string
		steps [][]string
		build func(s *Stream[string]) func() any
		want  any
	}{
		{
			name:  "Map",
			steps: [][]string{{"a", "bb"}, nil, {"ccc"}},
			build: func(s *Stream[string]) func() any {
				c := collect(Map(s, func(v string) int { return len(v) }))
				return func() any { return c.outs() }
			},
			want: []out[int]{{0, []int{1, 2}}, {1, nil}, {2, []int{3}}},
		},
		{
			name:  "Filter",
			steps: [][]string{{"a", "bb", "c"}, {"dd"}},
			build: func(s *Stream[string]) func() any {
				c := collect(Filter(s, func(v string) bool { return len(v) == 1 }))
				return func() any { return c.outs() }
			},
			want: []out[string]{{0, []string{"a", "c"}}, {1, nil}},
		},
		{
			name:  "FlatMap",
			steps: [][]string{{"a b", "", "c"}, {"d e f"}},
			build: func(s *Stream[string]) func() any {
				c := collect(FlatMap(s, strings.Fields))
				return func() any { return c.outs() }
			},
			want: []out[string]{{0, []string{"a", "b", "c"}}, {1, []string{"d", "e", "f"}}},
		},
		{
			name:  "MapBatch sees one part per block",
			steps: [][]string{{"a", "b"}, {"c"}},
			build: func(s *Stream[string]) func() any {
				c := collect(MapBatch(s, func(p []string) []int { return []int{len(p)} }))
				return func() any { return c.outs() }
			},
			want: []out[int]{{0, []int{2}}, {1, []int{1}}},
		},
		{
			name:  "Transform",
			steps: [][]string{{"a", "b"}, {"c"}},
			build: func(s *Stream[string]) func() any {
				c := collect(Transform(s, func(_ context.Context, b *batch.Batch[string]) (*batch.Batch[string], error) {
					recs := b.Records()
					slices.Reverse(recs)
					return batch.Derive(b, recs), nil
				}))
				return func() any { return c.outs() }
			},
			want: []out[string]{{0, []string{"b", "a"}}, {1, []string{"c"}}},
		},
		{
			name:  "Transform returning nil is empty",
			steps: [][]string{{"a"}},
			build: func(s *Stream[string]) func() any {
				c := collect(Transform(s, func(context.Context, *batch.Batch[string]) (*batch.Batch[int], error) { return nil, nil }))
				return func() any { return c.outs() }
			},
			want: []out[int]{{0, nil}},
		},
		{
			name:  "Union",
			steps: [][]string{{"a", "bb"}, {"ccc"}},
			build: func(s *Stream[string]) func() any {
				long := Filter(s, func(v string) bool { return len(v) > 1 })
				c := collect(Union(s, long, Map(long, strings.ToUpper)))
				return func() any { return c.outs() }
			},
			want: []out[string]{{0, []string{"a", "bb", "bb", "BB"}}, {1, []string{"ccc", "ccc", "CCC"}}},
		},
		{
			name:  "ReduceByKey",
			steps: [][]string{{"b a b", "c b"}, nil, {"a"}},
			build: func(s *Stream[string]) func() any {
				c := collect(ReduceByKey(wordPairs(s), sum))
				return func() any { return c.outs() }
			},
			want: []out[kv]{{0, []kv{{"b", 3}, {"a", 1}, {"c", 1}}}, {1, nil}, {2, []kv{{"a", 1}}}},
		},
		{
			name:  "CountByValue",
			steps: [][]string{{"x y x", "z x"}, {"y"}},
			build: func(s *Stream[string]) func() any {
				c := collect(CountByValue(FlatMap(s, strings.Fields)))
				return func() any { return c.outs() }
			},
			want: []out[Pair[string, int64]]{{0, []Pair[string, int64]{{"x", 3}, {"y", 1}, {"z", 1}}}, {1, []Pair[string, int64]{{"y", 1}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				p, r, s := newTest[string](t, Config{})
				got := tt.build(s)
				if err := feed(t, p, r, tt.steps); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if diff := cmp.Diff(tt.want, got(), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("outputs (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestSharedStreamComputedOnce checks that a stream used by two outputs is
// computed once per batch, and that outputs of a batch run in declaration
// order, batch after batch.
func TestSharedStreamComputedOnce(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		calls := 0
		var order []string
		m := Map(s, func(v string) string { calls++; return v })
		for _, name := range []string{"first", "second"} {
			ForEachBatch(m, func(_ context.Context, b *batch.Batch[string]) error {
				order = append(order, name+":"+strings.Join(b.Records(), ","))
				return nil
			})
		}
		if err := feed(t, p, r, [][]string{{"a", "b"}, {"c"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if calls != 3 {
			t.Errorf("map function called %d times, want 3 (once per record)", calls)
		}
		want := []string{"first:a,b", "second:a,b", "first:c", "second:c"}
		if diff := cmp.Diff(want, order); diff != "" {
			t.Errorf("output order (-want +got):\n%s", diff)
		}
	})
}

func TestForEach(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		var got []string
		ForEach(s, func(_ context.Context, v string) error { got = append(got, v); return nil })
		if err := feed(t, p, r, [][]string{{"a", "b"}, nil, {"c"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
	})
}

func TestPrint(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		var sb strings.Builder
		p, r, s := newTest[string](t, Config{Stdout: &sb})
		Print(CountByValue(s), 2)
		if err := feed(t, p, r, [][]string{{"a", "b", "a", "c"}, {"d"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := `-------------------------------------------
Time: 946684801000 ms (2000-01-01T00:00:01Z)
-------------------------------------------
(a, 2)
(b, 1)
...

-------------------------------------------
Time: 946684802000 ms (2000-01-01T00:00:02Z)
-------------------------------------------
(d, 1)

`
		if diff := cmp.Diff(want, sb.String()); diff != "" {
			t.Errorf("printed (-want +got):\n%s", diff)
		}
	})
}

func TestTransformError(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		boom := errors.New("boom")
		collect(Transform(s, func(context.Context, *batch.Batch[string]) (*batch.Batch[string], error) { return nil, boom }))
		err := feed(t, p, r, [][]string{{"a"}})
		var be *BatchError
		if !errors.As(err, &be) || !errors.Is(err, boom) {
			t.Fatalf("Run = %v, want a *BatchError wrapping %v", err, boom)
		}
		if want := batch.TimeOf(time.Unix(946684801, 0)); be.Time != want {
			t.Errorf("BatchError.Time = %v, want %v", be.Time, want)
		}
		if !strings.Contains(err.Error(), "Transform (stream 1)") {
			t.Errorf("error %q does not name the operator", err)
		}
	})
}

// TestTransformKeepsBatchTime checks that a Transform whose function
// returns a batch of another time fails the batch, naming the operator and
// the fix: the time is the batch's identity, which outputs key on (the
// files sink skips a time already written) and windows place it by, so a
// window of such batches was silently empty.
func TestTransformKeepsBatchTime(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{Logger: slog.New(slog.DiscardHandler)})
		tr := Transform(s, func(_ context.Context, b *batch.Batch[string]) (*batch.Batch[string], error) {
			return batch.New(0, nil, b.Records()), nil
		})
		c := collect(Window(tr, 2*time.Second, time.Second))
		err := feed(t, p, r, [][]string{{"a"}})
		var be *BatchError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "Transform (stream 1)") ||
			!strings.Contains(err.Error(), "batch.Derive") {
			t.Fatalf("Run = %v (windows %v), want a *BatchError naming Transform and batch.Derive", err, c.outs())
		}
	})
}

// TestUnionBlocks checks that a union of streams computed from the same
// blocks names each block once, while keeping every input's records.
func TestUnionBlocks(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		var got []string
		ForEachBatch(Union(s, Map(s, strings.ToUpper)), func(_ context.Context, b *batch.Batch[string]) error {
			var ids []string
			for _, id := range b.BlockIDs() {
				ids = append(ids, id.String())
			}
			got = append(got, strings.Join(ids, ",")+" "+strings.Join(b.Records(), ","))
			return nil
		})
		if err := feed(t, p, r, [][]string{{"a", "b"}, {"c"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []string{"block-0-0 a,b,A,B", "block-0-1 c,C"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("union batches (-want +got):\n%s", diff)
		}
	})
}

// TestMapBatchKeepsItsArgument checks that the slices MapBatch's function
// is given stay as they are after the call, even when what consumes the
// MapBatch keeps no slice (ForEach) and a Map before it could pass one
// buffer again and again.
func TestMapBatchKeepsItsArgument(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		var kept [][]string // only touched by the one partition's task
		upper := Map(FlatMap(s, strings.Fields), strings.ToUpper)
		ForEach(MapBatch(upper, func(c []string) []string {
			kept = append(kept, c)
			return c
		}), func(context.Context, string) error { return nil })
		if err := feed(t, p, r, [][]string{{"a b", "c d", "e"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := [][]string{{"A", "B"}, {"C", "D"}, {"E"}}
		if diff := cmp.Diff(want, kept); diff != "" {
			t.Errorf("slices kept by MapBatch's function (-want +got):\n%s", diff)
		}
	})
}
