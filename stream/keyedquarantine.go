package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirstream/weir/batch"
)

// Quarantine before a keyed operator. The map side of a keyed, window or
// state operator runs the narrow operators before it fused into its tasks
// (and, for ReduceByKey and the windowed reduces, its reduce), so a
// function that fails on one record fails the whole map side. With the
// operator's Quarantine, the map side then runs once more, on the
// driver's goroutine, with the roots of its chains yielding one record at
// a time (isolation, as an output's quarantine pass): a record whose
// processing fails is left out of the operator's input and quarantined,
// and the operator computes the batch from the others. The records that
// fail are the same whenever the batch is computed (functions are
// deterministic), so a batch replayed after a restart, to rebuild state,
// leaves the same records out; their letters, sent before the batch
// completed, are not sent again. A batch recomputed because it did not
// complete sends them again, in the same places (batch time, output,
// index).

// keyedDead is the Quarantine of a keyed, window, state or Transform
// operator.
type keyedDead struct {
	dead DeadLetters
	name string // the operator, as errors name it; set once it is made
	// out is the operator's number as an output: the pipeline's operators
	// with Quarantine come after its outputs, in order, in the letters
	// (DeadLetter.Output) and in BatchInfo.Outputs. Set by the engine.
	out int
}

// newKeyedDead returns the Quarantine o gives the operator what, or nil
// without one; a Quarantine of no DeadLetters is a graph error.
func newKeyedDead(p *Pipeline, what string, o options) *keyedDead {
	if !o.quarantine {
		return nil
	}
	if o.dead == nil || nilPointer(o.dead) {
		p.graphError(fmt.Errorf("%s: Quarantine(nil): pass the DeadLetters to send failing records to", what))
		return nil
	}
	kq := &keyedDead{dead: o.dead, name: what}
	p.mu.Lock()
	p.quarantiners = append(p.quarantiners, kq)
	p.mu.Unlock()
	return kq
}

// named sets the operator's name in letters and logs, once its node is made.
func (kq *keyedDead) named(n *node) {
	if kq != nil {
		kq.name = n.String()
	}
}

// mapTaskFailure is the failure of a map task of a keyed, window or state
// operator (see parted.mapTaskError): what its Quarantine can isolate.
type mapTaskFailure struct {
	err error
	msg string
}

func (e *mapTaskFailure) Error() string { return e.msg }
func (e *mapTaskFailure) Unwrap() error { return e.err }

// mapSide runs run, an operator's map side and what follows it in the
// batch, on the partitions of s, its input, par tasks at a time, with the
// operator's Quarantine kq (nil for none): when a map task fails (or a
// shared narrow operator before it, see partsToIsolate), it runs again
// isolated. It returns a nil in for a batch s has none, and the letters
// of the records left out, for kq.quarantine.
func mapSide[T, R any](r *run, kq *keyedDead, s *Stream[T], run func(in *parted[T], par int) (R, error)) (in *parted[T], out R, letters []DeadLetter, err error) {
	redo := func(in *parted[T]) (R, error) { return run(in, 1) }
	in, err = s.parts(r)
	switch {
	case err != nil:
		if refused := partsToIsolate(r, kq, s, err); refused != nil {
			out, letters, err = isolated(r, refused, redo)
			return refused, out, letters, err
		}
		return nil, out, nil, err
	case in == nil:
		return nil, out, nil, nil
	}
	if out, err = run(in, max(r.par, 1)); err == nil || !isolable(r, kq, err) {
		return in, out, nil, err
	}
	out, letters, err = isolated(r, in, redo)
	return in, out, letters, err
}

// stateTick runs a state operator's batch: apply (its map side, then its
// function) on the partitions of s, with its Quarantine dead, then sends
// the letters of the records the map side left out and of those the
// function failed on (taken, apply's).
func stateTick[T any](r *run, dead *keyedDead, s *Stream[T], apply func(ctx context.Context, par int, in *parted[T]) error, taken func() []DeadLetter) error {
	in, _, letters, err := mapSide(r, dead, s, func(in *parted[T], par int) (struct{}, error) {
		return struct{}{}, apply(r.ctx, par, in)
	})
	if err != nil || in == nil {
		return err
	}
	return dead.quarantine(r, append(letters, taken()...))
}

// partsToIsolate returns, when s's partitions failed with err because a
// function of a narrow operator whose stream other consumers share too
// panicked (such a stream is computed once, before them, not in the
// operator's tasks), s's partitions planned again with that operator
// fused into the tasks (see fusedAgain), to run isolated. Otherwise, or
// without kq, it returns nil.
func partsToIsolate[T any](r *run, kq *keyedDead, s *Stream[T], err error) *parted[T] {
	if _, ok := errors.AsType[*panicError](err); !ok || kq == nil || r.ctx.Err() != nil {
		return nil
	}
	pt, _, _ := fusedAgain(r, s)
	return pt
}

// isolable reports whether err, the failure of an operator's map side, is
// one its Quarantine kq isolates: a map task's.
func isolable(r *run, kq *keyedDead, err error) bool {
	_, ok := errors.AsType[*mapTaskFailure](err)
	return ok && kq != nil && r.ctx.Err() == nil
}

// isolatedParent returns, when parent's batch failed with err because a
// narrow operator's function panicked, the batch computed again with the
// records of its chains' roots isolated one at a time (isolatedBatch), the
// records it fails on left out and quarantined to kq: what a Window with
// Quarantine keeps. Otherwise, or without kq, it returns err.
func isolatedParent[T any](r *run, kq *keyedDead, parent *Stream[T], err error) (*batch.Batch[T], error) {
	if _, ok := errors.AsType[*panicError](err); !ok || kq == nil || r.ctx.Err() != nil {
		return nil, err
	}
	b, letters := isolatedBatch(r, parent)
	if b == nil {
		return nil, err
	}
	return b, kq.quarantine(r, letters)
}

// isolated runs redo, an operator's map side and what follows it, one
// task at a time, on in's records one root record at a time (see
// isolatedParts), leaving out those whose processing fails, and returns
// what redo returned and their letters.
func isolated[T, R any](r *run, in *parted[T], redo func(in *parted[T]) (R, error)) (R, []DeadLetter, error) {
	iso := &isolation{}
	prev := r.iso.Swap(iso)
	out, err := redo(isolatedParts(iso, in))
	r.iso.Store(prev)
	return out, iso.letters, err
}

// isolatedParts returns in as a map task reads it in the quarantine pass
// of iso: the outputs of each root record of partition i, once the record
// was processed without failing, the map task's own processing of them
// included (iso.done); none of a record whose processing failed.
func isolatedParts[T any](iso *isolation, in *parted[T]) *parted[T] {
	each := func(i int, yield func(int, []T) bool) bool {
		var held []T // the outputs of the root record being processed
		pos, stop := 0, false
		iso.done = func() {
			if len(held) > 0 && !stop {
				stop = !yield(pos, held)
			}
			held = nil // the consumer may keep the slice
		}
		iso.drop = func(int) { held = nil }
		defer func() { iso.done, iso.drop = nil, nil }()
		in.transient(i, func(p int, recs []T) bool {
			pos = p
			held = append(held, recs...)
			return !stop
		})
		return !stop
	}
	return &parted[T]{time: in.time, blocks: in.blocks, keys: in.keys, npos: in.npos, each: each}
}

// quarantine sends letters, the records kq's operator left out of r's
// batch, to its dead letters, numbered.
func (kq *keyedDead) quarantine(r *run, letters []DeadLetter) error {
	if kq == nil || len(letters) == 0 || r.replaying {
		return nil // a replayed batch's were sent when it completed
	}
	for i := range letters {
		letters[i].Time, letters[i].Output, letters[i].OutputName, letters[i].Index = r.job.time, kq.out, kq.name, i
	}
	if err := kq.dead.Quarantine(r.ctx, letters); err != nil {
		return fmt.Errorf("%s: quarantine %d records: %w", kq.name, len(letters), err)
	}
	if kq.out < len(r.outs) {
		r.outs[kq.out].Quarantined += len(letters)
	}
	r.logger.Warn("stream: records quarantined by an operator", "operator", kq.name, "batch", r.job.time,
		"records", len(letters), "err", letters[0].Err)
	return nil
}
