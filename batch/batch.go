package batch

import (
	"iter"
	"slices"
)

// Batch is the typed unit of work the driver cuts every batch interval: the
// records of a set of stored blocks, with the identity of those blocks.
//
// Records are held in parts. A batch read from a source has one part per
// block, in block order; operators that keep records apart (Map, Filter)
// keep the parts, operators that combine them (ReduceByKey) may make one.
// Whatever the operators did, Blocks and Ranges still name the input blocks
// the batch was computed from.
//
// A Batch is not modified after it is built and is safe for concurrent reads.
// The slices it returns are its own: callers must not modify them.
type Batch[T any] struct {
	time   Time
	blocks []BlockInfo
	parts  [][]T
	n      int
}

// New builds a batch at time t from the given input blocks and record parts.
// It keeps the slices it is given; callers must not modify them afterwards.
func New[T any](t Time, blocks []BlockInfo, parts ...[]T) *Batch[T] {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return &Batch[T]{time: t, blocks: blocks, parts: parts, n: n}
}

// Derive builds a batch with b's time and blocks and new record parts: the
// result of a transformation of b.
func Derive[T, U any](b *Batch[T], parts ...[]U) *Batch[U] {
	return New(b.time, b.blocks, parts...)
}

// Time returns the batch time.
func (b *Batch[T]) Time() Time { return b.time }

// Blocks returns the input blocks the batch was computed from, in order.
func (b *Batch[T]) Blocks() []BlockInfo { return b.blocks }

// BlockIDs returns the IDs of the input blocks, in order.
func (b *Batch[T]) BlockIDs() []BlockID {
	ids := make([]BlockID, len(b.blocks))
	for i, bl := range b.blocks {
		ids[i] = bl.ID
	}
	return ids
}

// Ranges returns the sequence ranges of all input blocks, block by block, in
// the order records were added to each block.
func (b *Batch[T]) Ranges() []SeqRange {
	var rs []SeqRange
	for _, bl := range b.blocks {
		rs = append(rs, bl.Ranges...)
	}
	return rs
}

// Len returns the number of records in the batch.
func (b *Batch[T]) Len() int { return b.n }

// Parts returns the record parts of the batch.
func (b *Batch[T]) Parts() [][]T { return b.parts }

// All returns an iterator over the batch's records, part by part.
func (b *Batch[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, p := range b.parts {
			for _, r := range p {
				if !yield(r) {
					return
				}
			}
		}
	}
}

// Records returns all records of the batch in one new slice.
func (b *Batch[T]) Records() []T {
	if len(b.parts) == 1 {
		return slices.Clone(b.parts[0])
	}
	out := make([]T, 0, b.n)
	for _, p := range b.parts {
		out = append(out, p...)
	}
	return out
}
