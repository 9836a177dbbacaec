package origin

import "testing"

// TestMergeFrom: a Filter merged from two others drops every record either
// would have dropped, and keeps the records neither saw.
func TestMergeFrom(t *testing.T) {
	v2 := func(shard, rangeStart, seq string) Tag {
		return Tag{Stream: "s", Shard: shard, RangeStart: rangeStart, Seq: seq}
	}
	v1 := func(writer string, b int64, i uint64) Tag { return Tag{Writer: writer, Batch: b, Index: i} }
	a, b := NewFilter(0), NewFilter(0)
	for _, tg := range []Tag{v2("o1", "10", "10"), v2("o1", "10", "12"), v1("w", 5, 1), v1("w", 5, 3)} {
		a.Keep(tg)
	}
	for _, tg := range []Tag{v2("o1", "11", "11"), v2("o2", "1", "4"), v1("w", 5, 2), v1("x", 1, 0)} {
		b.Keep(tg)
	}
	m := NewFilter(0)
	m.MergeFrom(a)
	m.MergeFrom(b)
	for _, tc := range []struct {
		tag  Tag
		keep bool
	}{
		{v2("o1", "11", "12"), false}, // a saw it
		{v2("o1", "11", "11"), false}, // b saw it
		{v2("o1", "11", "10"), false}, // below the higher range start: a copy
		{v2("o1", "11", "13"), true},
		{v2("o2", "1", "4"), false},
		{v2("o2", "1", "5"), true},
		{v1("w", 5, 1), false},
		{v1("w", 5, 2), false},
		{v1("w", 5, 3), false},
		{v1("w", 5, 4), true},
		{v1("x", 1, 0), false},
		{v1("y", 1, 0), true},
	} {
		if got := m.Keep(tc.tag); got != tc.keep {
			t.Errorf("Keep(%+v) after the merge = %v, want %v", tc.tag, got, tc.keep)
		}
	}
}
