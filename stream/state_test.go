package stream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestUpdateStateByKey keeps a running count per word and forgets a word
// in the first batch without it.
func TestUpdateStateByKey(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		var calls []string
		counts := UpdateStateByKey(wordPairs(s), func(k string, vs []int, st int, exists bool) (int, bool) {
			calls = append(calls, fmt.Sprintf("%s %v %d %t", k, vs, st, exists))
			if len(vs) == 0 {
				return 0, false
			}
			for _, v := range vs {
				st += v
			}
			return st, true
		})
		c := collect(counts)
		if err := feed(t, p, r, [][]string{{"a b", "a"}, {"a"}, nil, {"b c"}, {"c", "b"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []out[kv]{
			{0, []kv{{"a", 2}, {"b", 1}}},
			{1, []kv{{"a", 3}}},
			{2, nil},
			{3, []kv{{"b", 1}, {"c", 1}}},
			{4, []kv{{"b", 2}, {"c", 2}}},
		}
		if diff := cmp.Diff(want, c.outs(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("state (-want +got):\n%s", diff)
		}
		wantCalls := []string{
			"a [1 1] 0 false", "b [1] 0 false",
			"a [1] 2 true", "b [] 1 true",
			"a [] 3 true",
			"b [1] 0 false", "c [1] 0 false",
			"b [1] 1 true", "c [1] 1 true",
		}
		if diff := cmp.Diff(wantCalls, calls); diff != "" {
			t.Errorf("update calls (-want +got):\n%s", diff)
		}
	})
}

// TestUpdateStateByKeyValues checks that update gets each key's values in
// batch order, and that a function appending to them changes no other
// key's values.
func TestUpdateStateByKeyValues(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		pairs := Map(FlatMap(s, strings.Fields), func(w string) kv { return kv{w[:1], int(w[1] - '0')} })
		var calls []string
		sums := UpdateStateByKey(pairs, func(k string, vs []int, st int, _ bool) (int, bool) {
			calls = append(calls, fmt.Sprintf("%s %v", k, vs))
			for _, v := range append(vs, 100) {
				st += v
			}
			return st, true
		})
		c := collect(sums)
		if err := feed(t, p, r, [][]string{{"a1 b2 a3", "c4 a5"}, {"c6 b7"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		wantCalls := []string{"a [1 3 5]", "b [2]", "c [4]", "a []", "b [7]", "c [6]"}
		if diff := cmp.Diff(wantCalls, calls); diff != "" {
			t.Errorf("update calls (-want +got):\n%s", diff)
		}
		want := []out[kv]{
			{0, []kv{{"a", 109}, {"b", 102}, {"c", 104}}},
			{1, []kv{{"a", 209}, {"b", 209}, {"c", 210}}},
		}
		if diff := cmp.Diff(want, c.outs(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("state (-want +got):\n%s", diff)
		}
	})
}

// TestUpdateStateByKeyWithoutOutput checks that state is updated every batch
// even when the only output reads it at a window's slide.
func TestUpdateStateByKeyWithoutOutput(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		totals := UpdateStateByKey(wordPairs(s), func(_ string, vs []int, st int, _ bool) (int, bool) {
			for _, v := range vs {
				st += v
			}
			return st, true
		})
		c := collect(Window(totals, 2*time.Second, 2*time.Second))
		if err := feed(t, p, r, [][]string{{"a"}, {"a"}, {"a b"}, {"a"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []out[kv]{{1, []kv{{"a", 1}, {"a", 2}}}, {3, []kv{{"a", 3}, {"b", 1}, {"a", 4}, {"b", 1}}}}
		if diff := cmp.Diff(want, c.outs()); diff != "" {
			t.Errorf("windows of state (-want +got):\n%s", diff)
		}
	})
}
