package stream

import (
	"context"
	"iter"

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
	// from 0; the batch as ForEachBatch sees it holds them in index order.
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

// parted is a stream's batch as partitions, computed or not yet: the unit
// the engine runs in parallel. The batch it stands for holds the records of
// its partitions in partition order.
//
// A parted is made, and its fields read, by the driver's goroutine only;
// each may be called from several goroutines at once, for different
// partitions.
type parted[T any] struct {
	time   batch.Time
	blocks []batch.BlockInfo
	keys   []partKey // one per partition

	// each calls yield with the records of partition i, chunk by chunk, in
	// order, until yield returns false; it reports whether it ran to the
	// end. For a narrow operator it runs the chain of operators from the
	// last computed stream up, fused: this is where user functions run.
	each func(i int, yield func([]T) bool) bool

	// data holds the chunks of each partition once they are computed; nil
	// for a chain not run yet.
	data [][][]T
	// whole is the batch, if it is already made (a computed batch split
	// into partitions, a keyed operator's result).
	whole *batch.Batch[T]
}

// computed returns a parted whose partitions are data.
func computed[T any](t batch.Time, blocks []batch.BlockInfo, keys []partKey, data [][][]T) *parted[T] {
	pt := &parted[T]{time: t, blocks: blocks, keys: keys, data: data}
	pt.each = func(i int, yield func([]T) bool) bool {
		for _, c := range pt.data[i] {
			if !yield(c) {
				return false
			}
		}
		return true
	}
	return pt
}

// derived returns a parted with pt's time, blocks and partitions, whose
// partition i is each(i, ...).
func derived[T, U any](pt *parted[T], each func(i int, yield func([]U) bool) bool) *parted[U] {
	return &parted[U]{time: pt.time, blocks: pt.blocks, keys: pt.keys, each: each}
}

// compute runs pt's partitions as tasks, at most par at a time, and returns
// the computed result. A pt already computed is returned as it is.
func (pt *parted[T]) compute(ctx context.Context, par int) (*parted[T], error) {
	if pt.data != nil {
		return pt, nil
	}
	data := make([][][]T, len(pt.keys))
	err := parallel(ctx, par, len(pt.keys), func(_ context.Context, i int) error {
		var chunks [][]T
		pt.each(i, func(c []T) bool {
			if len(c) > 0 {
				chunks = append(chunks, c)
			}
			return true
		})
		data[i] = chunks
		return nil
	})
	if err != nil {
		return nil, err
	}
	return computed(pt.time, pt.blocks, pt.keys, data), nil
}

// batch returns the batch of a computed pt: the chunks of its partitions,
// in partition order, as the batch's parts.
func (pt *parted[T]) batch() *batch.Batch[T] {
	if pt.whole != nil {
		return pt.whole
	}
	n := 0
	for _, d := range pt.data {
		n += len(d)
	}
	parts := make([][]T, 0, n)
	for _, d := range pt.data {
		parts = append(parts, d...)
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
	data := make([][][]T, n)
	keys := make([]partKey, n)
	i, room := 0, (total+n-1)/max(n, 1)
	left := total
	for _, p := range b.Parts() {
		for len(p) > 0 {
			k := min(len(p), room)
			data[i] = append(data[i], p[:k])
			p, room, left = p[k:], room-k, left-k
			if room == 0 && i+1 < n {
				i++
				room = (left + (n - i) - 1) / (n - i)
			}
		}
	}
	pt := computed(b.Time(), b.Blocks(), keys, data)
	pt.whole = b
	return pt
}

// shardParts splits the records of blocks (recs[i] are those of blocks[i])
// into partitions, one per shard, in the order shards first appear: the
// records of a shard from every block, in block order and, within a block,
// in the order of its ranges, which is the order they were read in. A block
// whose ranges do not account for its records exactly (a receiver that adds
// records without ranges) is a partition of its own.
func shardParts[T any](blocks []batch.BlockInfo, recs [][]T) ([]partKey, [][][]T) {
	var keys []partKey
	var data [][][]T
	index := make(map[partKey]int)
	for i, info := range blocks {
		rs := recs[i]
		if len(rs) == 0 {
			continue
		}
		if !rangesCover(info.Ranges, len(rs)) {
			keys = append(keys, partKey{})
			data = append(data, [][]T{rs})
			continue
		}
		// Consecutive ranges of one shard (several reads in a block) make
		// one chunk.
		off := 0
		for r := 0; r < len(info.Ranges); {
			rg := info.Ranges[r]
			k := partKey{stream: rg.Stream, shard: rg.Shard}
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
			data[j] = append(data[j], rs[off:off+n:off+n])
			off += n
		}
	}
	return keys, data
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
