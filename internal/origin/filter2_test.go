package origin

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// fleetCopy is one copy of a version 2 tagged record in a reading shard.
type fleetCopy struct {
	tag   Tag
	first bool // the first copy of its origin in the whole stream
}

// srcRecord is a record of an origin shard: its sub-records (KPL) and the
// number of records each produced (FlatMap; 0 when filtered out).
type srcRecord struct {
	seq    string
	fanout []int // per sub-sequence
}

// fleetWriter is one worker writing the records of an origin shard from
// where it started: its batches, the one in flight, and what of it is not
// acknowledged yet.
type fleetWriter struct {
	next       int // index of the first source record not in a batch yet
	batchStart int // index of the current batch's first source record
	batchEnd   int // 0: no batch in flight
	pending    []Tag
	all        []Tag // the current batch's records, for a replay
}

// fleet simulates writers taking over an origin shard and writing its
// records through a sink that retries failed records after later ones
// (PutRecords), with zombies going on after a takeover, crashes replaying
// the batch in flight, and requests applied twice. It returns the copies
// each reading shard holds, in order.
type fleet struct {
	rng      *rand.Rand
	stream   string
	shard    string
	src      []srcRecord
	done     int // source records completed: all before it were written
	writers  []*fleetWriter
	readers  [][]fleetCopy
	seen     map[Tag]bool
	maxBatch int
}

func newFleet(rng *rand.Rand, shard string, readers [][]fleetCopy, seen map[Tag]bool) *fleet {
	f := &fleet{rng: rng, stream: "in", shard: shard, readers: readers, seen: seen, maxBatch: 1 + rng.IntN(40)}
	n := 20 + rng.IntN(200)
	seq := 9990 + rng.IntN(5) // crosses a digit: sequence numbers compare as numbers
	for range n {
		seq += 1 + rng.IntN(5)
		r := srcRecord{seq: strconv.Itoa(seq), fanout: []int{rng.IntN(4)}}
		if rng.IntN(6) == 0 { // a KPL aggregate
			r.fanout = append(r.fanout, rng.IntN(3), rng.IntN(3))
		}
		f.src = append(f.src, r)
	}
	f.writers = []*fleetWriter{{}}
	return f
}

// run steps random writers until every one has written every record.
func (f *fleet) run() {
	for len(f.writers) > 0 {
		i := f.rng.IntN(len(f.writers))
		if !f.step(i) {
			f.writers = append(f.writers[:i], f.writers[i+1:]...)
		}
	}
}

// step does one thing of writer i; false once it is finished.
func (f *fleet) step(i int) bool {
	w := f.writers[i]
	if w.batchEnd == 0 {
		if w.next >= len(f.src) {
			return false
		}
		w.batchStart, w.batchEnd = w.next, min(len(f.src), w.next+1+f.rng.IntN(f.maxBatch))
		w.all = f.batchRecords(w.batchStart, w.batchEnd)
		w.pending = append([]Tag(nil), w.all...)
	}
	switch r := f.rng.IntN(40); {
	case r == 0 && len(f.writers) < 3:
		// Another worker takes the lease from a checkpoint at or before
		// what is completed; the old one goes on as a zombie, or stops.
		f.writers = append(f.writers, &fleetWriter{next: f.rng.IntN(f.done + 1)})
		if f.rng.IntN(2) == 0 {
			return false
		}
		return true
	case r == 1:
		// A crash: the batch in flight is recomputed (the recovery log)
		// and written again from its start.
		w.pending = append(w.pending[:0], w.all...)
		return true
	}
	// One PutRecords call: some pending records, in any order; some fail
	// and stay pending; now and then the call is applied twice.
	f.rng.Shuffle(len(w.pending), func(a, b int) { w.pending[a], w.pending[b] = w.pending[b], w.pending[a] })
	send := w.pending[:min(len(w.pending), 1+f.rng.IntN(10))]
	var failed []Tag
	for range 1 + f.rng.IntN(8)/7 {
		failed = failed[:0]
		for _, t := range send {
			if f.rng.IntN(4) == 0 {
				failed = append(failed, t)
				continue
			}
			rd := readerOf(t, len(f.readers))
			at := t
			at.RangeStart = "" // the origin, whoever writes it
			f.readers[rd] = append(f.readers[rd], fleetCopy{tag: t, first: !f.seen[at]})
			f.seen[at] = true
		}
	}
	w.pending = append(failed, w.pending[len(send):]...)
	if len(w.pending) == 0 {
		f.done = max(f.done, w.batchEnd)
		w.next, w.batchEnd = w.batchEnd, 0
	}
	return true
}

// batchRecords returns the records a batch of source records [a, b)
// writes, tagged.
func (f *fleet) batchRecords(a, b int) []Tag {
	var out []Tag
	for _, r := range f.src[a:b] {
		for sub, n := range r.fanout {
			for x := range n {
				out = append(out, Tag{Stream: f.stream, Shard: f.shard, Seq: r.seq, SubSeq: uint64(sub), Index: uint64(x), RangeStart: f.src[a].seq})
			}
		}
	}
	return out
}

// readerOf is the reading shard of a record: a function of its origin, as
// a deterministic pipeline's partition key is.
func readerOf(t Tag, n int) int {
	h := uint(0)
	for _, c := range t.Shard + "/" + t.Seq {
		h = h*31 + uint(c)
	}
	return int((h + uint(t.SubSeq)*7 + uint(t.Index)*13) % uint(n))
}

// fleetHistory returns the reading shards of a random fleet history over
// one to three origin shards.
func fleetHistory(seed uint64) [][]fleetCopy {
	rng := rand.New(rand.NewPCG(seed, 21))
	readers := make([][]fleetCopy, 1+rng.IntN(3))
	seen := map[Tag]bool{}
	for s := range 1 + rng.IntN(3) {
		newFleet(rng, fmt.Sprint("shardId-", s), readers, seen).run()
	}
	return readers
}

// keeper decides, record by record, which copies a reader delivers.
type keeper interface{ Keep(Tag) bool }

// mismatch returns the first copy k decides wrongly in the reading
// shards, or "".
func mismatch(readers [][]fleetCopy, mk func() keeper) string {
	for r, recs := range readers {
		k := mk()
		for i, c := range recs {
			if got := k.Keep(c.tag); got != c.first {
				return fmt.Sprintf("reader %d, copy %d: Keep(%+v) = %v, first copy = %v", r, i, c.tag, got, c.first)
			}
		}
	}
	return ""
}

// TestFilterFleetExactlyOnce checks, on random fleet histories (two or
// three workers taking over an origin shard at checkpoints, zombies going
// on, crashes replaying a batch, PutRecords retries reordering a batch and
// repeating requests), that a Filter per reading shard keeps every first
// copy of a version 2 tagged record and drops every later one; and that
// the histories are hard enough to fail a reader keeping a high-water mark
// per origin shard.
func TestFilterFleetExactlyOnce(t *testing.T) {
	naiveFails, late, below := 0, 0, 0
	for seed := range uint64(200) {
		readers := fleetHistory(seed)
		if m := mismatch(readers, func() keeper { return NewFilter(0) }); m != "" {
			t.Fatalf("seed %d: %s", seed, m)
		}
		if mismatch(readers, func() keeper { return &highWater{} }) != "" {
			naiveFails++
		}
		l, b := fleetStats(readers)
		late, below = late+l, below+b
	}
	if naiveFails == 0 {
		t.Error("a high-water mark filter passed every history: the simulation does not reorder")
	}
	if late == 0 || below == 0 {
		t.Errorf("%d first copies came after a greater position, %d copies below a later range start: want both > 0", late, below)
	}
	t.Logf("high-water mark wrong on %d of 200 histories; %d late first copies, %d copies below the range start", naiveFails, late, below)
}

// fleetStats counts first copies that arrive after a greater position of
// their origin shard, and copies that arrive after a record of a later
// range start (dropped by the range start rule).
func fleetStats(readers [][]fleetCopy) (late, below int) {
	for _, recs := range readers {
		high := map[shardKey]pos{}
		start := map[shardKey]string{}
		for _, c := range recs {
			k, p := shardKey{c.tag.Stream, c.tag.Shard}, pos{c.tag.Seq, c.tag.SubSeq, c.tag.Index}
			if h, ok := high[k]; ok && c.first && comparePos(p, h) < 0 {
				late++
			}
			if s, ok := start[k]; ok && !c.first && comparePos(p, pos{seq: s}) < 0 {
				below++
			}
			if h, ok := high[k]; !ok || comparePos(p, h) > 0 {
				high[k] = p
			}
			start[k] = maxSeq(start[k], c.tag.RangeStart)
		}
	}
	return late, below
}

func maxSeq(a, b string) string {
	if a == "" || comparePos(pos{seq: b}, pos{seq: a}) > 0 {
		return b
	}
	return a
}

// highWater is the naive filter: it drops a record at or below the
// greatest position seen of its origin shard.
type highWater struct{ high map[shardKey]pos }

func (h *highWater) Keep(t Tag) bool {
	if h.high == nil {
		h.high = map[shardKey]pos{}
	}
	k, p := shardKey{t.Stream, t.Shard}, pos{t.Seq, t.SubSeq, t.Index}
	if g, ok := h.high[k]; ok && comparePos(p, g) <= 0 {
		return false
	}
	h.high[k] = p
	return true
}

// TestFilterV2StateRoundTrip checks that a Filter restored from its
// encoding in the middle of fleet histories (with version 1 tags mixed in)
// decides the rest as the original does.
func TestFilterV2StateRoundTrip(t *testing.T) {
	if err := NewFilter(0).UnmarshalBinary([]byte{1, 1, 0}); err != nil {
		t.Errorf("a version 1 state (no origin shards) refused: %v", err)
	}
	for seed := range uint64(20) {
		readers := fleetHistory(seed)
		recs := readers[0]
		for _, cut := range []int{0, len(recs) / 2, len(recs)} {
			a := NewFilter(2)
			for i, c := range recs[:cut] {
				a.Keep(c.tag)
				a.Keep(Tag{Writer: "w", Batch: 1, Index: uint64(i % 5)})
			}
			state, err := a.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			b := NewFilter(0)
			if err := b.UnmarshalBinary(state); err != nil {
				t.Fatalf("seed %d, cut %d: %v", seed, cut, err)
			}
			for i, c := range recs[cut:] {
				if ka, kb := a.Keep(c.tag), b.Keep(c.tag); ka != kb {
					t.Fatalf("seed %d, cut %d, record %d: original keeps %v, restored %v", seed, cut, i, ka, kb)
				}
			}
		}
	}
}

// TestFilterV2Bounded checks that a Filter forgets the lowest positions
// past MaxPositions (down to 3/4 of it), keeping their copies (duplicates, never losses).
func TestFilterV2Bounded(t *testing.T) {
	f := NewFilter(0)
	tag := func(i int) Tag { return Tag{Stream: "in", Shard: "s", Seq: strconv.Itoa(1000 + i), RangeStart: "1000"} }
	for i := range MaxPositions + 10 {
		if !f.Keep(tag(i)) {
			t.Fatalf("first copy %d dropped", i)
		}
	}
	if n := len(f.shards[shardKey{"in", "s"}].seen); n > MaxPositions || n < MaxPositions*3/4 {
		t.Errorf("%d positions remembered, want 3/4 of %d to %[2]d", n, MaxPositions)
	}
	if !f.Keep(tag(0)) {
		t.Error("a copy of a forgotten position was dropped")
	}
	if f.Keep(tag(MaxPositions + 9)) {
		t.Error("a copy of a remembered position was kept")
	}
}

// BenchmarkKeepV2 measures a reader's cost per record of version 2 tags:
// Decode and Keep, records of one origin shard in batches of 500 with
// their order shuffled within the batch (PutRecords retries), one in ten
// a copy.
func BenchmarkKeepV2(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const batchLen = 500
	var data [][]byte
	for n := range 20 {
		start := 1_000_000 + n*batchLen*10
		seq := func(v int) string { return fmt.Sprintf("49590338271490256608559692538361%024d", v) }
		var recs [][]byte
		for i := range batchLen {
			t := Tag{Stream: "in", Shard: "shardId-000000000001", Seq: seq(start + i*10), RangeStart: seq(start)}
			recs = append(recs, Append(nil, t, []byte(`{"k":"v"}`)))
			if rng.IntN(10) == 0 {
				recs = append(recs, recs[rng.IntN(len(recs))])
			}
		}
		rng.Shuffle(len(recs), func(a, b int) { recs[a], recs[b] = recs[b], recs[a] })
		data = append(data, recs...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range max(b.N/len(data), 1) {
		f := NewFilter(0)
		for _, d := range data {
			t, _, _, _ := Decode(d)
			f.Keep(t)
		}
	}
}
