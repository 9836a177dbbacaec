package batch

import (
	"iter"
	"slices"
	"strconv"
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
	time    Time
	blocks  []BlockInfo
	parts   [][]T
	n       int
	origins []Origin
}

// Origin is where a record of a batch came from: the source record it was
// made of, the same whoever reads the source and however often. A sink
// that writes to a stream another pipeline reads tags each record with it,
// so that the reader can drop the copies a replay, a lease moved mid-batch
// or a zombie worker writes (sink/kinesis does, with its Origin setting).
type Origin struct {
	// Stream and Shard name the source shard, as the batch's ranges do.
	Stream, Shard string
	// Seq and SubSeq are the source record's sequence number in its shard
	// and its sub-sequence number in a KPL aggregate (0 for a plain
	// record). Seq is "" for a record with no origin.
	Seq    string
	SubSeq int64
	// Index is the record's position among the records its source record
	// produced, from 0: 0 through Map and Filter, the position in the
	// output of FlatMap.
	Index int
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

// Origins returns the origin of each record of the batch, in the order of
// All, or nil if the batch has none. The stream package gives them to a
// ForEachBatch output declared with stream.Origins, downstream of a source
// whose records know their position (such as weir's Kinesis receiver's)
// through narrow operators only; a record with no origin has a zero
// Origin.
func (b *Batch[T]) Origins() []Origin { return b.origins }

// WithOrigins returns a batch with b's time, blocks and records, whose
// Origins are origins (one per record, in the order of All): for a test
// of an output that writes origins, or a Transform that keeps its records
// one for one. It panics if len(origins) is not b.Len(). It keeps origins;
// callers must not modify it afterwards.
func (b *Batch[T]) WithOrigins(origins []Origin) *Batch[T] {
	if len(origins) != b.n {
		panic("batch: WithOrigins: " + strconv.Itoa(len(origins)) + " origins for " + strconv.Itoa(b.n) + " records")
	}
	c := *b
	c.origins = origins
	return &c
}

// Keep returns the batch of b's records for which keep reports true: b's
// time and blocks, the records in the order of All with their parts kept
// apart (a part may be left empty), and, if b has Origins, the kept
// records' origins. keep is called once for each record, in the order of
// All, with its index there. It returns b itself when keep keeps every
// record.
//
// It is for a ForEachBatch function that leaves out records it cannot
// output, deals with them itself (counts them, logs them), writes the
// others with their origins and returns nil. A function that hands the
// records it cannot output to the dead letters returns
// stream.RecordErrors instead, and before writing anything: the output
// then calls it again with the batch of the others, made as Keep makes
// it, and a record it wrote before returning would be written again
// (unless its target tolerates that, as the sinks that return
// RecordErrors themselves do: see stream.RecordErrors).
func (b *Batch[T]) Keep(keep func(i int, v T) bool) *Batch[T] {
	var (
		cut     bool     // a record was left out
		parts   [][]T    // the parts, once cut
		origins []Origin // the kept records' origins, once cut, if b has some
	)
	i := 0
	for pi, p := range b.parts {
		part, partCut := p, false
		for j, v := range p {
			if keep(i, v) {
				if partCut {
					part = append(part, v)
				}
				if cut && b.origins != nil {
					origins = append(origins, b.origins[i])
				}
				i++
				continue
			}
			if !cut {
				cut = true
				parts = append(make([][]T, 0, len(b.parts)), b.parts[:pi]...)
				if b.origins != nil {
					origins = append(make([]Origin, 0, b.n-1), b.origins[:i]...)
				}
			}
			if !partCut {
				partCut = true
				part = append(make([]T, 0, len(p)-1), p[:j]...)
			}
			i++
		}
		if cut {
			parts = append(parts, part)
		}
	}
	if !cut {
		return b
	}
	nb := New(b.time, b.blocks, parts...)
	nb.origins = origins
	return nb
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
