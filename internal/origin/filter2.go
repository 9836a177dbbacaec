package origin

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/weirstream/weir/batch"
)

// MaxPositions is how many positions a Filter remembers per origin shard
// for version 2 tags; past it, the lowest are forgotten, and a copy of a
// forgotten one is kept (a duplicate, never a loss). The positions it must
// remember are those of one writing batch's range of the shard whose
// records go to the reading shard, so it bounds the records one batch may
// hold of one source shard before copies can slip through.
const MaxPositions = 1 << 16

// shardKey names an origin shard.
type shardKey struct{ stream, shard string }

// pos is the position of an output record in its origin shard: the source
// record's sequence and sub-sequence numbers, then the index among the
// records it produced.
type pos struct {
	seq    string
	subSeq uint64
	index  uint64
}

func comparePos(a, b pos) int {
	return cmp.Or(batch.CompareSeq(a.seq, b.seq), cmp.Compare(a.subSeq, b.subSeq), cmp.Compare(a.index, b.index))
}

// shardState is what a Filter remembers of one origin shard (version 2):
// the highest range start seen, and the positions seen at or above it, in
// order.
type shardState struct {
	start string
	seen  map[pos]struct{}
	used  uint64 // Filter.tick when last seen, for eviction
}

// keepV2 is Keep for a version 2 tag.
//
// Why it is exact. A writer (a worker's output) starts a batch that holds
// the records of origin shard O from sequence number R only once every
// record of O before R was written and acknowledged: by itself, in its
// earlier batches, which completed before this one started; or, before the
// checkpoint it started reading O from, by the writers whose completed
// batches that checkpoint counts. The same holds for a zombie (a worker
// that lost its lease and goes on) and for a batch recomputed after a
// crash. Kinesis orders a shard's records by arrival, so a record
// acknowledged before another is sent comes first (as Window assumes), and
// a record's origin decides its partition key and so its shard (functions
// are deterministic). So once a reading shard holds a record tagged with
// range start R, a copy of every record of O below R that belongs to this
// shard is already in it, earlier: any later record of O below R is a
// re-write, dropped. The records at or above the highest range start W
// seen may arrive in any order (PutRecords retries what failed, after
// later records of the batch; writers overlap), so the Filter remembers
// each position at or above W it has seen, and drops only those; when a
// higher range start arrives, the positions below it are forgotten. A
// first copy is never dropped: it is either at or above W and not seen
// before, or below W, which cannot be a first copy.
func (f *Filter) keepV2(t Tag) bool {
	k := shardKey{t.Stream, t.Shard}
	s := f.shards[k]
	if s == nil {
		s = f.addShard(k)
		s.start = t.RangeStart
	}
	s.used = f.tick
	if batch.CompareSeq(t.RangeStart, s.start) > 0 {
		s.start = t.RangeStart
		for p := range s.seen {
			if batch.CompareSeq(p.seq, s.start) < 0 {
				delete(s.seen, p)
			}
		}
	}
	if batch.CompareSeq(t.Seq, s.start) < 0 {
		return false
	}
	p := pos{t.Seq, t.SubSeq, t.Index}
	if _, found := s.seen[p]; found {
		return false
	}
	s.seen[p] = struct{}{}
	if len(s.seen) > MaxPositions {
		s.forget()
	}
	return true
}

// forget forgets the lowest positions of s, down to 3/4 of MaxPositions,
// so that it sorts them once in a quarter of MaxPositions new ones.
func (s *shardState) forget() {
	all := s.sorted()
	for _, p := range all[:len(all)-MaxPositions*3/4] {
		delete(s.seen, p)
	}
}

// sorted returns the positions of s in order.
func (s *shardState) sorted() []pos {
	return slices.SortedFunc(maps.Keys(s.seen), comparePos)
}

// addShard makes room for and returns a new origin shard's state.
func (f *Filter) addShard(k shardKey) *shardState {
	if len(f.shards) >= f.max {
		var oldest shardKey
		var at uint64
		first := true
		for n, s := range f.shards {
			if first || s.used < at {
				oldest, at, first = n, s.used, false
			}
		}
		delete(f.shards, oldest)
	}
	s := &shardState{seen: make(map[pos]struct{}), used: f.tick}
	f.shards[k] = s
	return s
}

// appendShards appends the origin shards' state to b, least recently seen
// first.
func (f *Filter) appendShards(b []byte) []byte {
	keys := slices.SortedFunc(maps.Keys(f.shards), func(a, b shardKey) int {
		return cmp.Compare(f.shards[a].used, f.shards[b].used)
	})
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		s := f.shards[k]
		b = binary.AppendUvarint(b, uint64(len(k.stream)))
		b = append(b, k.stream...)
		b = binary.AppendUvarint(b, uint64(len(k.shard)))
		b = append(b, k.shard...)
		b = appendDigits(b, s.start)
		b = binary.AppendUvarint(b, uint64(len(s.seen)))
		for _, p := range s.sorted() {
			b = appendDigits(b, p.seq)
			b = binary.AppendUvarint(b, p.subSeq)
			b = binary.AppendUvarint(b, p.index)
		}
	}
	return b
}

// readShards reads what appendShards wrote; their use ticks follow the
// writers' (tick is the writers' number).
func readShards(r *reader, maxShards, tick uint64) (map[shardKey]*shardState, error) {
	n := r.uvarint()
	if r.err == nil && n > maxShards {
		return nil, fmt.Errorf("%w: %d origin shards of at most %d", errState, n, maxShards)
	}
	shards := make(map[shardKey]*shardState, min(n, uint64(len(r.b))))
	for i := uint64(0); i < n && r.err == nil; i++ {
		var k shardKey
		for _, name := range []*string{&k.stream, &k.shard} {
			l := r.uvarint()
			if l > MaxNameLen {
				return nil, fmt.Errorf("%w: origin name of %d bytes", errState, l)
			}
			*name = string(r.bytes(int(l)))
		}
		s := &shardState{start: r.digits(), used: tick + i + 1}
		m := r.uvarint()
		if m > MaxPositions {
			return nil, fmt.Errorf("%w: %d positions", errState, m)
		}
		s.seen = make(map[pos]struct{}, min(m, uint64(len(r.b))))
		var last pos
		for i := range m {
			if r.err != nil {
				break
			}
			p := pos{seq: r.digits(), subSeq: r.uvarint(), index: r.uvarint()}
			if r.err == nil && (batch.CompareSeq(p.seq, s.start) < 0 || i > 0 && comparePos(last, p) >= 0) {
				return nil, fmt.Errorf("%w: positions of %v/%v out of order", errState, k.stream, k.shard)
			}
			s.seen[p], last = struct{}{}, p
		}
		if _, dup := shards[k]; dup {
			return nil, fmt.Errorf("%w: origin shard %q/%q twice", errState, k.stream, k.shard)
		}
		shards[k] = s
	}
	return shards, nil
}
