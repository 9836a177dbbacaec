package stream

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/batch"
)

// Map returns the stream of f applied to every record of s, keeping records
// in their partitions and in order. f is called concurrently for records of
// different partitions (see the Execution section of the package
// documentation), and in order within one.
func Map[T, U any](s *Stream[T], f func(T) U) *Stream[U] {
	mustExist("Map", "s", s)
	requireFunc(s.p, "Map", s.n, "f", f == nil)
	return narrowFold(s, "Map", func(in *parted[T], i int, transient bool, yield func(int, []U) bool) bool {
		var buf []U // the slice passed on again and again, when transient
		return in.iter(transient)(i, func(pos int, c []T) bool {
			var out []U
			if transient {
				buf = resize(buf, len(c))
				out = buf
			} else {
				out = make([]U, len(c))
			}
			for j, v := range c {
				out[j] = f(v)
			}
			return yield(pos, out)
		})
	}, func(in *parted[T], i int, yield func(int, U)) {
		in.transient(i, func(pos int, c []T) bool {
			for _, v := range c {
				yield(pos, f(v))
			}
			return true
		})
	})
}

// Filter returns the stream of the records of s for which keep returns
// true, in order. keep is called as Map's f is.
func Filter[T any](s *Stream[T], keep func(T) bool) *Stream[T] {
	mustExist("Filter", "s", s)
	requireFunc(s.p, "Filter", s.n, "keep", keep == nil)
	return narrow(s, "Filter", func(in *parted[T], i int, transient bool, yield func(int, []T) bool) bool {
		var buf []T // the slice passed on again and again, when transient
		return in.iter(transient)(i, func(pos int, c []T) bool {
			var out []T
			if transient {
				out = buf[:0]
			}
			for _, v := range c {
				if keep(v) {
					out = append(out, v)
				}
			}
			if transient {
				buf = out
			}
			return len(out) == 0 || yield(pos, out)
		})
	})
}

// FlatMap returns the stream of the records f makes of every record of s,
// in order: f may return any number of records for each. Each non-empty
// slice f returns is kept as it is, as one part of the batch (see MapBatch),
// so f must not reuse a slice it returned. f is called as Map's f is.
func FlatMap[T, U any](s *Stream[T], f func(T) []U) *Stream[U] {
	mustExist("FlatMap", "s", s)
	requireFunc(s.p, "FlatMap", s.n, "f", f == nil)
	return narrow(s, "FlatMap", func(in *parted[T], i int, transient bool, yield func(int, []U) bool) bool {
		// Each non-empty result of f is passed on as it is: the records
		// are not copied into one slice, which for a word split would cost
		// as much again as the split itself, in copying and in garbage.
		return in.iter(transient)(i, func(pos int, c []T) bool {
			for _, v := range c {
				if out := f(v); len(out) > 0 && !yield(pos, out) {
					return false
				}
			}
			return true
		})
	})
}

// MapBatch returns the stream of f applied to each part of each batch of s
// (a batch read from a source has one part per block and shard, see
// Partition): f sees many records at once, to amortise a per-call cost. f
// must not modify its argument and may return it. f is called concurrently
// for parts of different partitions, and in order within one.
func MapBatch[T, U any](s *Stream[T], f func([]T) []U) *Stream[U] {
	mustExist("MapBatch", "s", s)
	requireFunc(s.p, "MapBatch", s.n, "f", f == nil)
	return narrow(s, "MapBatch", func(in *parted[T], i int, _ bool, yield func(int, []U) bool) bool {
		// f is given the slices themselves, which it may keep: they are
		// never a buffer used again (parted.transient).
		return in.each(i, func(pos int, c []T) bool {
			out := f(c)
			return len(out) == 0 || yield(pos, out)
		})
	})
}

// Transform returns the stream of f applied to each whole batch of s. f may
// return an error, which fails the batch; if it returns a nil batch, the
// result is an empty batch with the time and blocks of the input. The batch
// f returns must have the input's time, the batch's identity (make it with
// batch.Derive(b, records), or batch.New(b.Time(), ...)): another time fails
// the batch. ctx is done when the Pipeline stops.
//
// Transform takes one Option, Quarantine: when f panics on a batch, every
// record of the batch is sent to the DeadLetters, with the panic, and the
// result is the empty batch; the narrow operators before Transform have
// their records isolated one by one, as before a Window (see Quarantine).
// An error f returns still fails the batch: the outputs try it again (see
// Retry), as an error may pass; f sees the whole batch, so it can leave
// out a record it cannot process itself.
func Transform[T, U any](s *Stream[T], f func(ctx context.Context, b *batch.Batch[T]) (*batch.Batch[U], error), opts ...Option) *Stream[U] {
	mustExist("Transform", "s", s)
	requireFunc(s.p, "Transform", s.n, "f", f == nil)
	dead := keyedQuarantine(s.p, "Transform of "+s.n.String(), opts)
	var out *Stream[U]
	out = newStream(s.p, "Transform", s.n.slide, []*node{s.n}, func(r *run) (*batch.Batch[U], error) {
		b, err := s.at(r)
		if err != nil {
			if b, err = isolatedParent(r, dead, s, err); err != nil {
				return nil, err
			}
		}
		if b == nil {
			return nil, nil
		}
		var nb *batch.Batch[U]
		err = safely(func() (err error) {
			nb, err = f(r.ctx, b)
			return err
		})
		if _, ok := err.(*panicError); ok {
			if dead == nil || r.ctx.Err() != nil {
				return nil, fmt.Errorf("%v: %w (%s)", out.n, err, transformStopFix)
			}
			if err := dead.quarantine(r, lettersOf(b.All(), batch.SeqRange{}, err)); err != nil {
				return nil, err
			}
			return batch.Derive[T, U](b), nil
		}
		if err != nil {
			return nil, fmt.Errorf("%v: %w", out.n, err)
		}
		if nb == nil {
			nb = batch.Derive[T, U](b)
		}
		if nb.Time() != b.Time() {
			// Outputs key on the time (the files sink skips a time it
			// wrote) and windows place the batch by it.
			return nil, fmt.Errorf("%v: f returned a batch of time %v for the batch at %v: return a batch of the same time, such as batch.Derive(b, records)",
				out.n, nb.Time(), b.Time())
		}
		return nb, nil
	})
	dead.named(out.n)
	return out
}

// transformStopFix ends the error of a Transform whose f panicked,
// without Quarantine: what the user can do about it.
const transformStopFix = "to set the batch's records aside and go on, give Transform stream.Quarantine(d); " +
	"otherwise fix f or the record: the batch is not completed, so its records are processed again after a restart"

// Union returns the stream of the records of s and of every other stream,
// batch by batch: the parts of s first, then those of others in order. The
// streams must belong to the same Pipeline and have the same slide interval
// (Run reports it otherwise). The union's blocks are those of all inputs,
// each once, in first-seen order.
func Union[T any](s *Stream[T], others ...*Stream[T]) *Stream[T] {
	mustExist("Union", "s", s)
	var all []*Stream[T] // s and the others given
	var parents []*node
	for i, o := range append([]*Stream[T]{s}, others...) {
		if o == nil {
			s.p.graphError(fmt.Errorf("Union of %v: argument %d is nil: pass a stream made from the same Pipeline", s.n, i))
			continue
		}
		all, parents = append(all, o), append(parents, o.n)
		switch {
		case o.p != s.p:
			s.p.graphError(fmt.Errorf("Union of %v: argument %d (%v) belongs to another Pipeline: build every stream from the same Pipeline", s.n, i, o.n))
		case o.n.slide != s.n.slide:
			s.p.graphError(fmt.Errorf("Union of %v: argument %d (%v) has slide %v, not %v: union streams of the same slide", s.n, i, o.n, o.n.slide, s.n.slide))
		}
	}
	out := newPlanned(s.p, "Union", s.n.slide, parents, func(r *run) (*parted[T], error) {
		var ins []*parted[T]
		var keys []partKey
		var blocks []batch.BlockInfo
		seen := make(map[batch.BlockID]bool)
		for _, o := range all {
			pt, err := o.parts(r)
			if err != nil {
				return nil, err
			}
			if pt == nil {
				continue
			}
			ins = append(ins, pt)
			keys = append(keys, pt.keys...)
			for _, bl := range pt.blocks {
				if !seen[bl.ID] {
					seen[bl.ID] = true
					blocks = append(blocks, bl)
				}
			}
		}
		// Positions follow the inputs' order: those of s first.
		npos := 0
		base := make([]int, len(ins))
		for k, in := range ins {
			base[k] = npos
			npos += in.npos
		}
		each := func(i int, transient bool, yield func(int, []T) bool) bool {
			for k, in := range ins {
				if i < len(in.keys) {
					return in.iter(transient)(i, func(pos int, c []T) bool { return yield(base[k]+pos, c) })
				}
				i -= len(in.keys)
			}
			return true
		}
		return &parted[T]{time: r.job.time, blocks: blocks, keys: keys, npos: npos,
			each: func(i int, yield func(int, []T) bool) bool { return each(i, false, yield) },
			scan: func(i int, yield func(int, []T) bool) bool { return each(i, true, yield) }}, nil
	})
	out.n.fused = true
	return out
}
