package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/batch"
)

// recordCodec encodes the records of a history: all of them at once.
type recordCodec[T any] struct {
	encode func(w *snapWriter, recs []T) error
	decode func(r *snapReader, n int) []T
	check  func() error
}

func plainRecords[T any](c Codec[T]) recordCodec[T] {
	return recordCodec[T]{
		encode: func(w *snapWriter, recs []T) error { return snapValues(w, c, recs) },
		decode: func(r *snapReader, n int) []T { return snapRead(r, c, n) },
		check:  func() error { return checkCodec(c) },
	}
}

// pairRecords encodes pairs as their keys, then their values, each with
// its own codec.
func pairRecords[K comparable, V any](kc Codec[K], vc Codec[V]) recordCodec[Pair[K, V]] {
	return recordCodec[Pair[K, V]]{
		encode: func(w *snapWriter, recs []Pair[K, V]) error {
			keys, vals := splitPairs(recs)
			return errors.Join(snapValues(w, kc, keys), snapValues(w, vc, vals))
		},
		decode: func(r *snapReader, n int) []Pair[K, V] {
			return joinPairs(snapRead(r, kc, n), snapRead(r, vc, n))
		},
		check: func() error { return errors.Join(checkCodec(kc), checkCodec(vc)) },
	}
}

func splitPairs[K comparable, V any](ps []Pair[K, V]) ([]K, []V) {
	keys, vals := make([]K, len(ps)), make([]V, len(ps))
	for i, p := range ps {
		keys[i], vals[i] = p.Key, p.Value
	}
	return keys, vals
}

func joinPairs[K comparable, V any](keys []K, vals []V) []Pair[K, V] {
	if len(keys) != len(vals) {
		return nil
	}
	ps := make([]Pair[K, V], len(keys))
	for i := range keys {
		ps[i] = Pair[K, V]{Key: keys[i], Value: vals[i]}
	}
	return ps
}

// encode writes the kept batches: their times, blocks and part lengths,
// then all their records at once.
func (h *history[T]) encode(w *snapWriter, rc recordCodec[T]) error {
	w.uint(uint64(len(h.bs)))
	var all []T
	for _, b := range h.bs {
		w.int(int64(b.Time()))
		blocks, err := json.Marshal(b.Blocks())
		if err != nil {
			return err
		}
		w.bytes(blocks)
		w.uint(uint64(len(b.Parts())))
		for _, p := range b.Parts() {
			w.uint(uint64(len(p)))
			all = append(all, p...)
		}
	}
	w.uint(uint64(len(all)))
	return rc.encode(w, all)
}

// decode reads what encode wrote.
func (h *history[T]) decode(r *snapReader, rc recordCodec[T]) error {
	type shape struct {
		t      batch.Time
		blocks []batch.BlockInfo
		parts  []int
	}
	shapes := make([]shape, r.count())
	for i := range shapes {
		s := &shapes[i]
		s.t = batch.Time(r.int())
		if b := r.bytes(); r.err == nil {
			if err := json.Unmarshal(b, &s.blocks); err != nil {
				return fmt.Errorf("blocks of batch %v: %w", s.t, err)
			}
		}
		s.parts = make([]int, r.count())
		for j := range s.parts {
			s.parts[j] = int(r.uint())
		}
	}
	n := r.uint()
	if r.err != nil {
		return r.err
	}
	all := rc.decode(r, int(n))
	if r.err != nil {
		return r.err
	}
	bs := make([]*batch.Batch[T], len(shapes))
	for i, s := range shapes {
		parts := make([][]T, len(s.parts))
		for j, l := range s.parts {
			if l > len(all) {
				return fmt.Errorf("batch %v: a part of %d records, %d left", s.t, l, len(all))
			}
			parts[j], all = all[:l:l], all[l:]
		}
		bs[i] = batch.New(s.t, s.blocks, parts...)
	}
	if len(all) > 0 {
		return fmt.Errorf("%d records left over", len(all))
	}
	h.bs = bs
	return nil
}

// windowState is the nodeState of a Window: its history.
type windowState[T any] struct {
	h     *history[T]
	slide time.Duration
	rc    recordCodec[T]
}

func (s *windowState[T]) unwindowed(t batch.Time) (batch.Time, int) {
	return s.h.unwindowed(t, s.slide)
}

func (w *windowReduce[K, V]) unwindowed(t batch.Time) (batch.Time, int) {
	return w.h.unwindowed(t, w.slide)
}

func (s *windowState[T]) check() error { return s.rc.check() }

// quiet: a window of empty batches is empty, and one more empty batch in
// it changes no later window.
func (s *windowState[T]) quiet(batch.Time, func(*node) bool) bool { return s.h.empty() }

func (s *windowState[T]) snapshot() ([]byte, error) {
	var w snapWriter
	if err := s.h.encode(&w, s.rc); err != nil {
		return nil, err
	}
	return w.buf, nil
}

func (s *windowState[T]) restore(data []byte) error {
	r := &snapReader{buf: data}
	if err := s.h.decode(r, s.rc); err != nil {
		return err
	}
	return r.done()
}

func (w *windowReduce[K, V]) check() error { return w.rc.check() }

// quiet: as a Window's, and with an inverse, no key in the window kept, so
// that the next window, computed incrementally or from the history, enters
// the same batches into an empty window.
func (w *windowReduce[K, V]) quiet(batch.Time, func(*node) bool) bool {
	return w.h.empty() && (w.win == nil || len(w.win.pairs) == 0)
}

// snapshot encodes the history of per-batch reductions and, with an
// inverse, the window kept: its length, its time, its keys in order, their
// values and counts. (Snapshots before the length was kept mark the window
// 1 and lack it; they are still read.)
func (w *windowReduce[K, V]) snapshot() ([]byte, error) {
	var sw snapWriter
	if err := w.h.encode(&sw, w.rc); err != nil {
		return nil, err
	}
	if w.inverse == nil || !w.ok {
		sw.uint(0)
		return sw.buf, nil
	}
	sw.uint(2)
	sw.int(int64(w.length))
	sw.int(int64(w.at))
	pairs := make([]Pair[K, V], len(w.win.pairs))
	counts := make([]uint64, len(w.win.pairs))
	for i, kc := range w.win.pairs {
		pairs[i], counts[i] = Pair[K, V]{Key: kc.Key, Value: kc.Value.v}, uint64(kc.Value.n)
	}
	sw.uint(uint64(len(pairs)))
	for _, c := range counts {
		sw.uint(c)
	}
	if err := w.rc.encode(&sw, pairs); err != nil {
		return nil, err
	}
	return sw.buf, nil
}

func (w *windowReduce[K, V]) restore(data []byte) error {
	r := &snapReader{buf: data}
	if err := w.h.decode(r, w.rc); err != nil {
		return err
	}
	w.win, w.at, w.ok = nil, 0, false
	if kept := r.uint(); kept == 1 || kept == 2 {
		length := w.length // a snapshot marked 1 does not say: taken as this one
		if kept == 2 {
			length = time.Duration(r.int())
		}
		at := batch.Time(r.int())
		counts := make([]int, r.count())
		for i := range counts {
			counts[i] = int(r.uint())
		}
		pairs := w.rc.decode(r, len(counts))
		if r.err == nil {
			w.win = newWindowKeys[K, V](len(pairs))
			for i, p := range pairs {
				j, _ := w.win.keyPos(p.Key, firstAt{})
				w.win.pairs[j].Value = counted[V]{v: p.Value, n: counts[i]}
			}
			// A window of another length (the pipeline restarted with a
			// new one) is not slid from: the next one is made from the
			// history.
			w.at, w.ok = at, length == w.length
			if !w.ok {
				w.win, w.at = nil, 0
			}
		}
	}
	return r.done()
}
