package origin

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// copyOf is one copy of a record in a shard, as a reader sees it.
type copyOf struct {
	tag   Tag
	first bool // the first copy of its tag in the whole stream
}

// simulate writes batches of writer w into shards the way sink/kinesis
// does, with the faults that reorder and repeat records: each request holds
// records of the window [lowest unacknowledged, +Window) in random order,
// random ones fail and are sent again in a later request, a request is now
// and then applied twice (the SDK retried a call whose answer was lost),
// and a batch may be cut short by a crash and written again from its start
// (a replay). Records go to shard shardOf(index). It appends to shards and
// returns the tags written, once each.
func simulate(rng *rand.Rand, shards [][]copyOf, w string, batches []int64, n func() int, seen map[Tag]bool) []Tag {
	var all []Tag
	for _, bt := range batches {
		size := n()
		for i := range size {
			all = append(all, Tag{Writer: w, Batch: bt, Index: uint64(i)})
		}
		runs := 1
		if rng.IntN(3) == 0 {
			runs = 2 + rng.IntN(2) // crashed once or twice, then replayed
		}
		for run := range runs {
			crashAfter := -1 // requests before the crash
			if run < runs-1 {
				crashAfter = rng.IntN(10)
			}
			write(rng, shards, w, bt, size, crashAfter, seen)
		}
	}
	return all
}

// write writes one batch of size records, or its first requests only.
func write(rng *rand.Rand, shards [][]copyOf, w string, bt int64, size, crashAfter int, seen map[Tag]bool) {
	acked := make([]bool, size)
	low := 0
	for req := 0; low < size; req++ {
		if req == crashAfter {
			return
		}
		var send []int
		for i := low; i < size && i < low+Window && len(send) < 500; i++ {
			if !acked[i] && rng.IntN(4) != 0 { // not every eligible one each time
				send = append(send, i)
			}
		}
		rng.Shuffle(len(send), func(a, b int) { send[a], send[b] = send[b], send[a] })
		applied := 1 + rng.IntN(8)/7 // sometimes twice
		for range applied {
			for _, i := range send {
				if rng.IntN(5) == 0 { // failed: retried later
					continue
				}
				tag := Tag{Writer: w, Batch: bt, Index: uint64(i)}
				s := shardOf(i, len(shards))
				shards[s] = append(shards[s], copyOf{tag: tag, first: !seen[tag]})
				seen[tag] = true
				acked[i] = true
			}
		}
		for low < size && acked[low] {
			low++
		}
	}
}

func shardOf(i, shards int) int { return (i*7 + i/3) % shards }

// TestFilterExactlyOnce checks, on random histories with failures,
// reordering, repeated requests and replays of several writers, that a
// Filter per shard delivers every record exactly once: no first copy is
// ever dropped (even one that arrives after later records of its batch),
// and every later copy is.
func TestFilterExactlyOnce(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			shards := make([][]copyOf, 1+rng.IntN(4))
			seen := map[Tag]bool{}
			var want []Tag
			maxSize := []int{50, 600, 3 * Window}[seed%3]
			for w := range 1 + rng.IntN(3) {
				batches := []int64{1000, 2000, 3000, 5000}[:1+rng.IntN(4)]
				want = append(want, simulate(rng, shards, fmt.Sprint("w", w), batches, func() int { return rng.IntN(maxSize) }, seen)...)
			}
			var got []Tag
			late := 0 // first copies that came after a greater index
			for _, recs := range shards {
				f := NewFilter(0)
				high := map[string]uint64{}
				for _, c := range recs {
					if c.first && c.tag.Index < high[c.tag.Writer] {
						late++
					}
					high[c.tag.Writer] = max(high[c.tag.Writer], c.tag.Index)
					keep := f.Keep(c.tag)
					if keep != c.first {
						t.Fatalf("Keep(%+v) = %v, but first copy = %v", c.tag, keep, c.first)
					}
					if keep {
						got = append(got, c.tag)
					}
				}
			}
			sortTags(want)
			sortTags(got)
			// slices.Equal first: a Diff of thousands of equal tags costs
			// the test most of its time under -race.
			if !slices.Equal(want, got) {
				t.Fatalf("delivered (-want +got):\n%s", gocmp.Diff(want, got))
			}
			if len(want) > 100 && late == 0 {
				t.Errorf("no first copy arrived late: the simulation does not reorder")
			}
		})
	}
}

func sortTags(ts []Tag) {
	slices.SortFunc(ts, func(a, b Tag) int {
		return cmp.Or(strings.Compare(a.Writer, b.Writer), cmp.Compare(a.Batch, b.Batch), cmp.Compare(a.Index, b.Index))
	})
}

// TestFilterCases pins the rules of both tag versions.
func TestFilterCases(t *testing.T) {
	tag := func(w string, b int64, i uint64) Tag { return Tag{Writer: w, Batch: b, Index: i} }
	v2 := func(seq string, index uint64, start string) Tag {
		return Tag{Stream: "in", Shard: "s", Seq: seq, Index: index, RangeStart: start}
	}
	for _, tc := range []struct {
		name string
		in   []Tag
		want []bool
	}{
		{"a late first copy is kept", []Tag{tag("w", 1, 5), tag("w", 1, 2), tag("w", 1, 5), tag("w", 1, 2)}, []bool{true, true, false, false}},
		{"below the window is a copy", []Tag{tag("w", 1, 0), tag("w", 1, Window), tag("w", 1, 0), tag("w", 1, 1)}, []bool{true, true, false, true}},
		{"the window's edge", []Tag{tag("w", 1, Window+3), tag("w", 1, 3), tag("w", 1, 4)}, []bool{true, false, true}},
		{"a new batch forgets the last", []Tag{tag("w", 1, 3), tag("w", 2, 3), tag("w", 2, 3)}, []bool{true, true, false}},
		{"an older batch is kept", []Tag{tag("w", 2, 3), tag("w", 1, 3), tag("w", 1, 3)}, []bool{true, true, true}},
		{"writers apart", []Tag{tag("a", 1, 3), tag("b", 1, 3), tag("a", 1, 3)}, []bool{true, true, false}},
		{"a long jump clears the bitmap", []Tag{tag("w", 1, 1), tag("w", 1, 3*Window+1), tag("w", 1, 3*Window+1-Window+1)}, []bool{true, true, true}},
		{"v2: a late first copy is kept", []Tag{v2("15", 0, "10"), v2("12", 0, "10"), v2("15", 0, "10"), v2("12", 0, "10")}, []bool{true, true, false, false}},
		{"v2: fan-out indexes apart", []Tag{v2("12", 1, "10"), v2("12", 0, "10"), v2("12", 1, "10")}, []bool{true, true, false}},
		{"v2: below a later range start is a copy", []Tag{v2("12", 0, "10"), v2("20", 0, "20"), v2("15", 0, "10"), v2("25", 0, "10")}, []bool{true, true, false, true}},
		{"v2: a zombie's copy at or above the start", []Tag{v2("25", 0, "20"), v2("25", 0, "10"), v2("26", 0, "10")}, []bool{true, false, true}},
		{"v2: numbers, not strings", []Tag{v2("9", 0, "9"), v2("10", 0, "10"), v2("9", 0, "9")}, []bool{true, true, false}},
		{"v2: shards apart", []Tag{v2("20", 0, "20"), {Stream: "in", Shard: "t", Seq: "12", RangeStart: "10"}}, []bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFilter(0)
			var got []bool
			for _, tg := range tc.in {
				got = append(got, f.Keep(tg))
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Keep (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFilterEvictionKeeps checks that a writer a full Filter forgot has
// its copies kept (duplicates), never dropped.
func TestFilterEvictionKeeps(t *testing.T) {
	f := NewFilter(2)
	for _, w := range []string{"a", "b", "c"} {
		if !f.Keep(Tag{Writer: w, Batch: 1, Index: 1}) {
			t.Fatalf("first copy of %s dropped", w)
		}
	}
	if !f.Keep(Tag{Writer: "a", Batch: 1, Index: 1}) {
		t.Error("a copy of a forgotten writer was dropped")
	}
	if f.Keep(Tag{Writer: "c", Batch: 1, Index: 1}) {
		t.Error("a copy of a remembered writer was kept")
	}
}

// TestFilterStateRoundTrip checks that a Filter restored from its encoding
// in the middle of a history decides the rest as the original does.
func TestFilterStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	shards := make([][]copyOf, 1)
	for w := range 5 {
		simulate(rng, shards, fmt.Sprint("w", w), []int64{1, 2}, func() int { return 1 + rng.IntN(2*Window) }, map[Tag]bool{})
	}
	recs := shards[0]
	rng.Shuffle(len(recs), func(a, b int) { recs[a], recs[b] = recs[b], recs[a] }) // any history will do
	for _, cut := range []int{0, 1, len(recs) / 3, len(recs) - 1} {
		a := NewFilter(4)
		for _, c := range recs[:cut] {
			a.Keep(c.tag)
		}
		state, err := a.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		b := NewFilter(0)
		if err := b.UnmarshalBinary(state); err != nil {
			t.Fatalf("cut %d: UnmarshalBinary: %v", cut, err)
		}
		again, _ := b.MarshalBinary()
		if diff := gocmp.Diff(state, again); diff != "" {
			t.Fatalf("cut %d: re-encoding differs", cut)
		}
		for i, c := range recs[cut:] {
			if ka, kb := a.Keep(c.tag), b.Keep(c.tag); ka != kb {
				t.Fatalf("cut %d, record %d %+v: original keeps %v, restored %v", cut, cut+i, c.tag, ka, kb)
			}
		}
	}
}

// FuzzFilterState checks that UnmarshalBinary never panics and that a
// state it accepts encodes back to the same bytes or to one that decodes
// the same.
func FuzzFilterState(f *testing.F) {
	fl := NewFilter(3)
	fl.Keep(Tag{Writer: "a", Batch: 1, Index: 70})
	fl.Keep(Tag{Writer: "b", Batch: 2, Index: 9000})
	fl.Keep(Tag{Stream: "in", Shard: "s", Seq: "15", Index: 1, RangeStart: "10"})
	fl.Keep(Tag{Stream: "in", Shard: "s", Seq: "12", RangeStart: "10"})
	state, _ := fl.MarshalBinary()
	f.Add(state)
	f.Add([]byte{stateVersion, 1, 0, 0})
	f.Add([]byte{1, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := NewFilter(0)
		if err := g.UnmarshalBinary(data); err != nil {
			return
		}
		enc, _ := g.MarshalBinary()
		h := NewFilter(0)
		if err := h.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-encoded state refused: %v", err)
		}
		enc2, _ := h.MarshalBinary()
		if diff := gocmp.Diff(enc, enc2); diff != "" {
			t.Fatalf("state not stable across a round trip")
		}
	})
}
