package stream

import (
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/weirstream/weir/batch"
)

// Window returns the stream of the windows of s: every slide, a batch of
// the records of the batches of s in the last length, that is of batch
// times in (t-length, t] for a window at time t.
//
// Windows are at the batch times that are multiples of slide (since the
// Unix epoch, so they are the same after a restart). The first windows of a
// run are partial: they hold only the batches since the start. length and
// slide must be positive multiples of the slide of s (for a stream that is
// not windowed, the batch interval); otherwise Run refuses to start with an
// error wrapping ErrInvalidConfig naming the bad argument. A slide longer
// than length samples s: the batches between two windows are in none, so
// their records reach no output through this stream (Window logs this at
// INFO when it is called).
//
// The window keeps the batches of s it needs (the last length of them), not
// the source's stored blocks, which are dropped once their batch completes.
// A window batch has the parts and blocks of its batches, in time order.
//
// With Config.Recovery, the kept batches are part of the state snapshots
// (see UpdateStateByKey), so the windows after a restart hold what they
// would have held without it; their records are encoded with GobCodec
// unless a StateCodec option gives another codec for T. A window whose
// time is after the last batch of a drained Run is output by a restart
// only if it runs that time: see Pipeline.Drain. With Quarantine, a
// record that the functions before it fail on is set aside and the batch
// kept without it (see Quarantine).
func Window[T any](s *Stream[T], length, slide time.Duration, opts ...Option) *Stream[T] {
	mustExist("Window", "s", s)
	length, slide = checkWindow(s.p, "Window", s.n, length, slide)
	h := &history[T]{}
	o := applyOptions(opts)
	o.refuseOthers(s.p, "Window of "+s.n.String(), windowOptions)
	cs := newCodecSet(o)
	ws := &windowState[T]{h: h, slide: slide, rc: plainRecords(codecFor[T](cs))}
	cs.unused(s.p, "Window", s.n)
	dead := newKeyedDead(s.p, "Window of "+s.n.String(), o)
	out := newStatefulStream(s.p, "Window", slide, []*node{s.n}, func(r *run) (*batch.Batch[T], error) {
		t := r.job.time
		var parts [][]T
		var blocks []batch.BlockInfo
		for _, b := range h.between(t.Add(-length), t) {
			parts = append(parts, b.Parts()...)
			blocks = append(blocks, b.Blocks()...)
		}
		return batch.New(t, blocks, parts...), nil
	}, h.tick(s, length, dead))
	out.n.keepState(ws)
	dead.named(out.n)
	return out
}

// checkWindow records a graph error for a length or slide that is not a
// positive multiple of the parent's slide, and returns usable values (the
// parent's slide for a bad one) so the graph can still be built.
func checkWindow(p *Pipeline, op string, parent *node, length, slide time.Duration) (time.Duration, time.Duration) {
	check := func(name string, d time.Duration) time.Duration {
		ps := parent.slide
		if d > 0 && d%ps == 0 {
			return d
		}
		fix := max(ps, (d+ps-1)/ps*ps)
		p.graphError(fmt.Errorf("%s of %v: %s %v: must be a positive multiple of the slide of %v (%v), such as %v",
			op, parent, name, d, parent, ps, fix))
		return ps
	}
	length, slide = check("length", length), check("slide", slide)
	if slide > length {
		p.cfg.Logger.Info("stream: a window slides further than its length: the batches between two windows are in none, "+
			"so their records reach no output through it; make length at least slide to see every record",
			"op", op, "of", parent.String(), "length", length, "slide", slide)
	}
	return length, slide
}

// history keeps a parent stream's batches, in time order, for a window.
type history[T any] struct {
	bs []*batch.Batch[T]
	// keep, when the history is kept per shard, leaves out of a batch
	// entering it the records of shards not loaded (pershard.go).
	keep func(T) bool
}

// tick returns a node tick that adds parent's batch, if it has one, and
// drops the batches older than keep before the batch time. With dead, the
// Window's Quarantine, a batch of parent that a narrow operator's function
// failed is computed again without the records it fails on (see
// isolatedParent).
func (h *history[T]) tick(parent *Stream[T], keep time.Duration, dead *keyedDead) func(r *run) error {
	return func(r *run) error {
		b, err := parent.at(r)
		if err != nil {
			if b, err = isolatedParent(r, dead, parent, err); err != nil {
				return err
			}
		}
		if b != nil {
			if h.keep != nil {
				b = filterBatch(b, h.keep)
			}
			// In time order: a shard's history loaded from a worker
			// ahead of this one may hold later batches (pershard.go).
			i := len(h.bs)
			for i > 0 && h.bs[i-1].Time() > b.Time() {
				i--
			}
			h.bs = slices.Insert(h.bs, i, b)
		}
		cut := r.job.time.Add(-keep)
		i := 0
		for i < len(h.bs) && h.bs[i].Time() <= cut {
			i++
		}
		if i > 0 {
			h.bs = append(h.bs[:0:0], h.bs[i:]...) // a new array frees the old batches
		}
		return nil
	}
}

// unwindowed returns the time of the first window after the batch at t,
// of a window operator of slide, and how many kept batches with records
// are after the last window at or before t: in no window output yet.
func (h *history[T]) unwindowed(t batch.Time, slide time.Duration) (batch.Time, int) {
	ms := slide.Milliseconds()
	last := batch.Time(int64(t) / ms * ms)
	n := 0
	for _, b := range h.bs {
		if b.Time() > last && b.Len() > 0 {
			n++
		}
	}
	return last.Add(slide), n
}

// empty reports whether every kept batch is empty.
func (h *history[T]) empty() bool {
	for _, b := range h.bs {
		if b.Len() > 0 {
			return false
		}
	}
	return true
}

// between returns the kept batches with times in (from, to], in time order.
func (h *history[T]) between(from, to batch.Time) []*batch.Batch[T] {
	lo, hi := len(h.bs), len(h.bs)
	for i, b := range h.bs {
		if b.Time() > from {
			lo = i
			break
		}
	}
	for i := lo; i < len(h.bs); i++ {
		if h.bs[i].Time() > to {
			hi = i
			break
		}
	}
	return h.bs[lo:hi]
}

// ReduceByKeyAndWindow returns, every slide, one pair per key of the
// batches of s in the last length (as Window), with the key's values
// combined by reduce, which must be associative and commutative.
//
// With inverse nil, each window is reduced from the per-batch reductions of
// its batches. With inverse set, a window is computed from the previous one:
// the batches that left the window are taken out with inverse (inverse(a, b)
// must undo reduce(a, b), as subtraction undoes addition) and the batches
// that entered are added with reduce. A key is dropped from the window when
// no batch in the window has it any more, whatever its value: so both ways
// give the same pairs. Pair order is deterministic but not otherwise
// specified, and may differ between the two ways; a window recomputed
// after a restart has the order it had.
//
// Each batch of s is first reduced by key as by ReduceByKey, so reduce is
// called concurrently, as there.
//
// length and slide are checked as for Window, and a slide longer than
// length samples s as there. The operator keeps the
// per-batch reductions of the last length+slide and, with an inverse, the
// last window. With Config.Recovery both are part of the state snapshots
// (see UpdateStateByKey), keys and values encoded with GobCodec unless
// StateCodec options give other codecs for K or V. As for Window, a window
// whose time is after the last batch of a drained Run is output by a
// restart only if it runs that time: see Pipeline.Drain. It takes
// Quarantine as ReduceByKey does: a record is set aside once, when its
// batch is reduced, not once per window.
func ReduceByKeyAndWindow[K comparable, V any](s *Stream[Pair[K, V]], reduce, inverse func(V, V) V, length, slide time.Duration, opts ...Option) *Stream[Pair[K, V]] {
	mustExist("ReduceByKeyAndWindow", "s", s)
	requireFunc(s.p, "ReduceByKeyAndWindow", s.n, "reduce", reduce == nil)
	length, slide = checkWindow(s.p, "ReduceByKeyAndWindow", s.n, length, slide)
	o := applyOptions(opts)
	o.refuseOthers(s.p, "ReduceByKeyAndWindow of "+s.n.String(), stateOptions)
	// Each batch is reduced by key first, in parallel, as by ReduceByKey,
	// once: its records that fail are quarantined once, not once per
	// window.
	kd := reduceByKey[K](reduce)
	kd.dead = newKeyedDead(s.p, "ReduceByKeyAndWindow of "+s.n.String(), o)
	perBatch := newPlanned(s.p, "ReduceByKeyAndWindow(per batch)", s.n.slide, []*node{s.n}, kd.plan(s))
	cs := newCodecSet(o)
	w := &windowReduce[K, V]{reduce: reduce, inverse: inverse, length: length, slide: slide,
		rc: pairRecords(codecFor[K](cs), codecFor[V](cs))}
	cs.unused(s.p, "ReduceByKeyAndWindow", s.n)
	keep := w.h.tick(perBatch, length+slide, nil) // perBatch quarantines itself
	out := newStatefulStream(s.p, "ReduceByKeyAndWindow", slide, []*node{perBatch.n}, w.compute, func(r *run) error {
		if err := keep(r); err != nil {
			return err
		}
		// The kept window moves in the tick, which the replay after a
		// restart runs too: so the windows after it are computed from the
		// one before, as in the run, and list their keys in the same order.
		if inverse != nil && validAt(r.job.time, slide) {
			w.slideTo(r.job.time)
		}
		return nil
	})
	out.n.keepState(w)
	kd.dead.named(out.n)
	return out
}

// windowReduce is the state of a ReduceByKeyAndWindow.
type windowReduce[K comparable, V any] struct {
	reduce, inverse func(V, V) V
	length, slide   time.Duration
	h               history[Pair[K, V]]
	rc              recordCodec[Pair[K, V]]

	// red reduces each window, without an inverse.
	red *reducer[K, V]

	// win is the previous window, kept only with an inverse: its keys in
	// the order they entered, each with its value and count, indexed by
	// key as a map task's pairs are (no Go map, no value allocated per
	// key). A key that left has a count of 0 until slideTo compacts win.
	win *combined[K, counted[V]]
	at  batch.Time
	ok  bool
}

// counted is a key's value in a window and the number of the window's
// batches that have the key.
type counted[V any] struct {
	v V
	n int
}

func (w *windowReduce[K, V]) compute(r *run) (*batch.Batch[Pair[K, V]], error) {
	t := r.job.time
	in := w.h.between(t.Add(-w.length), t)
	var blocks []batch.BlockInfo
	for _, b := range in {
		blocks = append(blocks, b.Blocks()...)
	}
	if w.inverse == nil {
		if w.red == nil {
			w.red = newReducer[K](w.reduce)
		}
		w.red.start()
		for _, b := range in {
			for kv := range b.All() {
				w.red.add(kv.Key, kv.Value)
			}
		}
		return batch.New(t, blocks, w.red.out()), nil
	}
	if !w.ok || w.at != t {
		w.slideTo(t) // the tick moves it; this is in case it did not
	}
	out := make([]Pair[K, V], len(w.win.pairs))
	for i, kc := range w.win.pairs {
		out[i] = Pair[K, V]{Key: kc.Key, Value: kc.Value.v}
	}
	return batch.New(t, blocks, out), nil
}

// slideTo moves the kept window to time t: incrementally from the window
// one slide earlier if it is the one kept, otherwise from scratch.
func (w *windowReduce[K, V]) slideTo(t batch.Time) {
	prev := t.Add(-w.slide)
	if !w.ok || w.at != prev {
		w.win = newWindowKeys[K, V](0)
		for _, b := range w.h.between(t.Add(-w.length), t) {
			w.enter(b)
		}
	} else {
		// Left: in (prev-length, prev] but not after t-length.
		for _, b := range w.h.between(prev.Add(-w.length), min(prev, t.Add(-w.length))) {
			w.leave(b)
		}
		w.compact()
		// Entered: in (t-length, t] but not before prev.
		for _, b := range w.h.between(max(prev, t.Add(-w.length)), t) {
			w.enter(b)
		}
	}
	w.at, w.ok = t, true
}

// newWindowKeys returns an empty kept window with room for n keys.
func newWindowKeys[K comparable, V any](n int) *combined[K, counted[V]] {
	c := &combined[K, counted[V]]{seed: maphash.MakeSeed()}
	c.index.reset(n)
	return c
}

// enter adds the pairs of b, a batch reduced by key, to the kept window.
func (w *windowReduce[K, V]) enter(b *batch.Batch[Pair[K, V]]) {
	for kv := range b.All() {
		i, added := w.win.keyPos(kv.Key, firstAt{})
		c := &w.win.pairs[i].Value
		if added {
			*c = counted[V]{v: kv.Value, n: 1}
			continue
		}
		c.v = w.reduce(c.v, kv.Value)
		c.n++
	}
}

// leave takes the pairs of b, a batch reduced by key, out of the kept
// window. A key no batch of the window has any more keeps a count of 0,
// and its value is not used, until compact drops it.
func (w *windowReduce[K, V]) leave(b *batch.Batch[Pair[K, V]]) {
	for kv := range b.All() {
		i, _ := w.win.find(kv.Key, maphash.Comparable(w.win.seed, kv.Key))
		if i < 0 {
			continue
		}
		c := &w.win.pairs[i].Value
		if c.n == 0 {
			continue
		}
		if c.n--; c.n > 0 {
			c.v = w.inverse(c.v, kv.Value)
		}
	}
}

// compact drops the keys that left the kept window, keeping the others'
// order.
func (w *windowReduce[K, V]) compact() {
	w.win.retain(func(i int) bool { return w.win.pairs[i].Value.n > 0 })
}
