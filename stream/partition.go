package stream

import (
	"context"
	"iter"
	"sync/atomic"

	"github.com/weirstream/weir/batch"
)

// Partition is one partition of a batch, as ForEachPartition sees it: the
// unit of parallel work. Downstream of a source and of narrow operators
// (Map, Filter, FlatMap, MapBatch, Union), a partition holds the records of
// one shard in the batch, from all of the batch's blocks, in the order they
// were read (see the Execution section of the package documentation).
//
// A Partition is only valid during the call it is given to: it must not be
// kept, and its records must not be modified.
type Partition[T any] struct {
	// Time is the batch time.
	Time batch.Time
	// Index is the partition's position among the batch's partitions,
	// from 0: for a source's, the order in which their shards first appear
	// in the batch's blocks.
	Index int
	// Stream and Shard name the shard whose records the partition holds,
	// downstream of a source and of narrow operators. They are "" for a
	// partition that is not one shard's: a block read without ranges, the
	// output of a keyed operator (ReduceByKey, CountByValue) or of a
	// whole-batch operator (Transform, Window, state).
	Stream, Shard string

	chunks [][]T
}

// All returns an iterator over the partition's records, in order.
func (p Partition[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, c := range p.chunks {
			for _, v := range c {
				if !yield(v) {
					return
				}
			}
		}
	}
}

// Len returns the number of records in the partition.
func (p Partition[T]) Len() int {
	n := 0
	for _, c := range p.chunks {
		n += len(c)
	}
	return n
}

// Records returns the partition's records in one new slice.
func (p Partition[T]) Records() []T {
	out := make([]T, 0, p.Len())
	for _, c := range p.chunks {
		out = append(out, c...)
	}
	return out
}

// partKey names what a partition holds: one shard's records (shard set), or
// a block's records that carry no ranges, or a slice of a computed batch.
type partKey struct {
	stream, shard string
}

// chunk is a slice of a partition's records and its position in the batch:
// the batch as ForEachBatch sees it holds the chunks of all partitions by
// position, and, for one position, in the order its partition made them.
// Positions start at the input: for a source, each run of one shard's
// records in a block is a position, numbered in block order, so a batch
// keeps the order of its blocks through narrow operators while each
// partition keeps the order of its shard.
type chunk[T any] struct {
	pos  int
	recs []T
}

// parted is a stream's batch as partitions, computed or not yet: the unit
// the engine runs in parallel.
//
// A parted is made, and its fields read, by the driver's goroutine only;
// each may be called from several goroutines at once, for different
// partitions.
type parted[T any] struct {
	time   batch.Time
	blocks []batch.BlockInfo
	keys   []partKey // one per partition
	npos   int       // positions are in [0, npos)

	// each calls yield with the records of partition i, chunk by chunk, in
	// order, with their position, until yield returns false; it reports
	// whether it ran to the end. Positions never decrease within a
	// partition. For a narrow operator it runs the chain of operators from
	// the last computed stream up, fused: this is where user functions run.
	each func(i int, yield func(pos int, recs []T) bool) bool
	// scan, if not nil, is each for a consumer that keeps none of the
	// slices it is given (see transient): a narrow operator's chain then
	// fills one buffer again and again instead of making a slice per
	// chunk. Set by narrow and Union.
	scan func(i int, yield func(pos int, recs []T) bool) bool

	// data holds the chunks of each partition once they are computed; nil
	// for a chain not run yet.
	data [][]chunk[T]
	// whole is the batch, if it is already made (a source's, with one part
	// per block; a computed batch split into partitions; a keyed
	// operator's result).
	whole *batch.Batch[T]

	// iso is the run's quarantine pass, for a computed pt (the root of
	// the chains of narrow operators run on it): while it holds one, each
	// yields records one at a time (see isolated). Set by Stream.parts.
	iso *atomic.Pointer[isolation]
	// ranged reports a source's partitions, whose records are those of
	// the blocks' ranges, in order (see origin).
	ranged bool
	// trace is set on a source's partitions whose records know their
	// position (source.Positioned), and passed on to the chains of narrow
	// operators run on them: while an output collects origins it holds a
	// tracer, and each yields the records one at a time (see traced).
	trace *atomic.Pointer[tracer]

	// fold, if not nil, calls yield with each record of partition i, one
	// at a time, in order, with its position, for a consumer that folds
	// records and keeps none (ReduceByKey's and CountByValue's map side,
	// which ReduceByKeyAndWindow's uses too). Map sets it:
	// a record passed as it is made is not written to a buffer and read
	// back, which for a keyed operator after a Map costs more than the
	// extra call (see BenchmarkKeyedPaired).
	fold func(i int, yield func(pos int, v T))
}

// computed returns a parted whose partitions are data.
func computed[T any](t batch.Time, blocks []batch.BlockInfo, keys []partKey, npos int, data [][]chunk[T]) *parted[T] {
	pt := &parted[T]{time: t, blocks: blocks, keys: keys, npos: npos, data: data}
	pt.each = func(i int, yield func(int, []T) bool) bool {
		if pt.trace != nil {
			if tr := pt.trace.Load(); tr != nil {
				return pt.traced(tr, i, yield)
			}
		}
		if pt.iso != nil {
			if iso := pt.iso.Load(); iso != nil {
				return pt.isolated(iso, i, yield)
			}
		}
		for _, c := range pt.data[i] {
			if !yield(c.pos, c.recs) {
				return false
			}
		}
		return true
	}
	return pt
}

// derived returns a parted with pt's time, blocks and partitions, whose
// partition i is each(i, false, ...), or each(i, true, ...) for a consumer
// that keeps no slice (see transient).
func derived[T, U any](pt *parted[T], each func(i int, transient bool, yield func(int, []U) bool) bool) *parted[U] {
	return &parted[U]{time: pt.time, blocks: pt.blocks, keys: pt.keys, npos: pt.npos, trace: pt.trace,
		each: func(i int, yield func(int, []U) bool) bool { return each(i, false, yield) },
		scan: func(i int, yield func(int, []U) bool) bool { return each(i, true, yield) }}
}

// transient calls yield with the records of partition i as each does, but
// the slices it passes are valid only until yield returns: the consumer
// must copy what it keeps. It is for the consumers that fold records
// (a keyed operator's map side, ForEach), so that the narrow operators
// before them allocate no slice per chunk.
func (pt *parted[T]) transient(i int, yield func(pos int, recs []T) bool) bool {
	if pt.scan != nil {
		return pt.scan(i, yield)
	}
	return pt.each(i, yield)
}

// iter returns pt.transient if transient is set, else pt.each: how a narrow
// operator reads its input, as its own consumer reads it.
func (pt *parted[T]) iter(transient bool) func(i int, yield func(pos int, recs []T) bool) bool {
	if transient {
		return pt.transient
	}
	return pt.each
}

// compute runs pt's partitions as tasks, at most par at a time, and returns
// the computed result. A pt already computed is returned as it is.
func (pt *parted[T]) compute(ctx context.Context, par int) (*parted[T], error) {
	if pt.data != nil {
		return pt, nil
	}
	data := make([][]chunk[T], len(pt.keys))
	err := parallel(ctx, par, len(pt.keys), func(_ context.Context, i int) error {
		var chunks []chunk[T]
		pt.each(i, func(pos int, recs []T) bool {
			if len(recs) > 0 {
				chunks = append(chunks, chunk[T]{pos, recs})
			}
			return true
		})
		data[i] = chunks
		return nil
	})
	if err != nil {
		return nil, err
	}
	return computed(pt.time, pt.blocks, pt.keys, pt.npos, data), nil
}

// batch returns the batch of a computed pt: its chunks, by position, as the
// batch's parts.
func (pt *parted[T]) batch() *batch.Batch[T] {
	if pt.whole != nil {
		return pt.whole
	}
	n := 0
	for _, d := range pt.data {
		n += len(d)
	}
	// Each position is one partition's: gather the chunks by position,
	// keeping their order, then list the positions in order.
	byPos := make([][][]T, pt.npos)
	for _, d := range pt.data {
		for _, c := range d {
			byPos[c.pos] = append(byPos[c.pos], c.recs)
		}
	}
	parts := make([][]T, 0, n)
	for _, cs := range byPos {
		parts = append(parts, cs...)
	}
	return batch.New(pt.time, pt.blocks, parts...)
}

// split returns b as at most n partitions of consecutive records of about
// the same size, for the streams computed batch by batch (Transform, Window,
// state, a keyed operator's result), so that what follows them runs in
// parallel too.
func split[T any](b *batch.Batch[T], n int) *parted[T] {
	total := b.Len()
	n = max(min(n, total), 1)
	if total == 0 {
		n = 0
	}
	data := make([][]chunk[T], n)
	keys := make([]partKey, n)
	i, room := 0, (total+n-1)/max(n, 1)
	left, pos := total, 0
	for _, p := range b.Parts() {
		for len(p) > 0 {
			k := min(len(p), room)
			data[i] = append(data[i], chunk[T]{pos, p[:k]})
			p, room, left, pos = p[k:], room-k, left-k, pos+1
			if room == 0 && i+1 < n {
				i++
				room = (left + (n - i) - 1) / (n - i)
			}
		}
	}
	pt := computed(b.Time(), b.Blocks(), keys, pos, data)
	pt.whole = b
	return pt
}

// shardParts splits the records of blocks (recs[i] are those of blocks[i])
// into partitions, one per shard, in the order shards first appear: the
// records of a shard from every block, in block order and, within a block,
// in the order of its ranges, which is the order they were read in. A block
// whose ranges do not account for its records exactly (a receiver that adds
// records without ranges) is a partition of its own. It returns the number
// of positions too: one per run of a shard's records in a block.
func shardParts[T any](blocks []batch.BlockInfo, recs [][]T) ([]partKey, int, [][]chunk[T]) {
	var keys []partKey
	data := make([][]chunk[T], 0, len(blocks)) // not nil: computed, even if empty
	index := make(map[partKey]int)
	pos := 0
	for i, info := range blocks {
		rs := recs[i]
		if len(rs) == 0 {
			continue
		}
		if !rangesCover(info.Ranges, len(rs)) {
			keys = append(keys, partKey{})
			data = append(data, []chunk[T]{{pos, rs}})
			pos++
			continue
		}
		// Consecutive ranges of one shard (several reads in a block) make
		// one chunk.
		off := 0
		for r := 0; r < len(info.Ranges); {
			k := partKey{stream: info.Ranges[r].Stream, shard: info.Ranges[r].Shard}
			n := 0
			for ; r < len(info.Ranges) && info.Ranges[r].Stream == k.stream && info.Ranges[r].Shard == k.shard; r++ {
				n += info.Ranges[r].Count
			}
			j, ok := index[k]
			if !ok {
				j = len(keys)
				index[k] = j
				keys = append(keys, k)
				data = append(data, nil)
			}
			data[j] = append(data[j], chunk[T]{pos, rs[off : off+n : off+n]})
			off += n
			pos++
		}
	}
	return keys, pos, data
}

// rangesCover reports whether ranges account for exactly n records, each
// range for at least one.
func rangesCover(ranges []batch.SeqRange, n int) bool {
	if len(ranges) == 0 {
		return false
	}
	sum := 0
	for _, rg := range ranges {
		if rg.Count <= 0 || rg.Shard == "" {
			return false
		}
		sum += rg.Count
	}
	return sum == n
}
