package stream

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/batch"
)

// Map returns the stream of f applied to every record of s, keeping records
// in their parts and in order.
func Map[T, U any](s *Stream[T], f func(T) U) *Stream[U] {
	requireFunc(s.p, "Map", s.n, "f", f == nil)
	return derive(s, "Map", func(_ context.Context, b *batch.Batch[T]) (*batch.Batch[U], error) {
		parts := make([][]U, len(b.Parts()))
		for i, p := range b.Parts() {
			out := make([]U, len(p))
			for j, v := range p {
				out[j] = f(v)
			}
			parts[i] = out
		}
		return batch.Derive(b, parts...), nil
	})
}

// Filter returns the stream of the records of s for which keep returns
// true, in order.
func Filter[T any](s *Stream[T], keep func(T) bool) *Stream[T] {
	requireFunc(s.p, "Filter", s.n, "keep", keep == nil)
	return derive(s, "Filter", func(_ context.Context, b *batch.Batch[T]) (*batch.Batch[T], error) {
		parts := make([][]T, len(b.Parts()))
		for i, p := range b.Parts() {
			var out []T
			for _, v := range p {
				if keep(v) {
					out = append(out, v)
				}
			}
			parts[i] = out
		}
		return batch.Derive(b, parts...), nil
	})
}

// FlatMap returns the stream of the records f makes of every record of s,
// in order: f may return any number of records for each. Each non-empty
// slice f returns is kept as it is, as one part of the batch (see MapBatch),
// so f must not reuse a slice it returned.
func FlatMap[T, U any](s *Stream[T], f func(T) []U) *Stream[U] {
	requireFunc(s.p, "FlatMap", s.n, "f", f == nil)
	return derive(s, "FlatMap", func(_ context.Context, b *batch.Batch[T]) (*batch.Batch[U], error) {
		// Each non-empty result of f becomes a part of its own: the records
		// are not copied into one slice, which for a word split would cost
		// as much again as the split itself, in copying and in garbage.
		var parts [][]U
		for _, p := range b.Parts() {
			for _, v := range p {
				if c := f(v); len(c) > 0 {
					parts = append(parts, c)
				}
			}
		}
		return batch.Derive(b, parts...), nil
	})
}

// MapBatch returns the stream of f applied to each part of each batch of s
// (a batch read from a source has one part per block): f sees many records
// at once, to amortise a per-call cost. f must not modify its argument and
// may return it.
func MapBatch[T, U any](s *Stream[T], f func([]T) []U) *Stream[U] {
	requireFunc(s.p, "MapBatch", s.n, "f", f == nil)
	return derive(s, "MapBatch", func(_ context.Context, b *batch.Batch[T]) (*batch.Batch[U], error) {
		parts := make([][]U, len(b.Parts()))
		for i, p := range b.Parts() {
			parts[i] = f(p)
		}
		return batch.Derive(b, parts...), nil
	})
}

// Transform returns the stream of f applied to each whole batch of s. f may
// return an error, which fails the batch; if it returns a nil batch, the
// result is an empty batch with the time and blocks of the input. ctx is
// done when the Pipeline stops.
func Transform[T, U any](s *Stream[T], f func(ctx context.Context, b *batch.Batch[T]) (*batch.Batch[U], error)) *Stream[U] {
	requireFunc(s.p, "Transform", s.n, "f", f == nil)
	var out *Stream[U]
	out = derive(s, "Transform", func(ctx context.Context, b *batch.Batch[T]) (*batch.Batch[U], error) {
		nb, err := f(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", out.n, err)
		}
		if nb == nil {
			nb = batch.Derive[T, U](b)
		}
		return nb, nil
	})
	return out
}

// Union returns the stream of the records of s and of every other stream,
// batch by batch: the parts of s first, then those of others in order. The
// streams must belong to the same Pipeline and have the same slide interval
// (Run reports it otherwise). The union's blocks are those of all inputs,
// each once, in first-seen order.
func Union[T any](s *Stream[T], others ...*Stream[T]) *Stream[T] {
	all := append([]*Stream[T]{s}, others...)
	parents := make([]*node, len(all))
	for i, o := range all {
		parents[i] = o.n
		switch {
		case o.p != s.p:
			s.p.graphError(fmt.Errorf("Union of %v: argument %d (%v) belongs to another Pipeline: build every stream from the same Pipeline", s.n, i, o.n))
		case o.n.slide != s.n.slide:
			s.p.graphError(fmt.Errorf("Union of %v: argument %d (%v) has slide %v, not %v: union streams of the same slide", s.n, i, o.n, o.n.slide, s.n.slide))
		}
	}
	return newStream(s.p, "Union", s.n.slide, parents, func(r *run) (*batch.Batch[T], error) {
		var parts [][]T
		var blocks []batch.BlockInfo
		seen := make(map[batch.BlockID]bool)
		for _, o := range all {
			b, err := o.at(r)
			if err != nil {
				return nil, err
			}
			if b == nil {
				continue
			}
			parts = append(parts, b.Parts()...)
			for _, bl := range b.Blocks() {
				if !seen[bl.ID] {
					seen[bl.ID] = true
					blocks = append(blocks, bl)
				}
			}
		}
		return batch.New(r.job.time, blocks, parts...), nil
	})
}
