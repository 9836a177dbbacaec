package stream

import (
	"fmt"
	"hash/maphash"
)

// Pair is a keyed record: the element type of the streams ReduceByKey,
// CountByValue, ReduceByKeyAndWindow and UpdateStateByKey work on.
type Pair[K comparable, V any] struct {
	Key   K
	Value V
}

// anyKey returns p's key, for the operators that place records by their
// key without knowing its type (a Window kept per shard).
func (p Pair[K, V]) anyKey() any { return p.Key }

// String formats p as "(key, value)".
func (p Pair[K, V]) String() string { return fmt.Sprintf("(%v, %v)", p.Key, p.Value) }

// reducer combines the values of pairs by key, in the order keys first
// appear, so its result is deterministic, hashing each key once (see
// combined). Used for window after window, it keeps its index, sized for
// the last window's keys.
type reducer[K comparable, V any] struct {
	reduce func(V, V) V
	c      combined[K, V]
}

func newReducer[K comparable, V any](reduce func(V, V) V) *reducer[K, V] {
	return &reducer[K, V]{reduce: reduce, c: combined[K, V]{seed: maphash.MakeSeed()}}
}

// start empties r for a new result.
func (r *reducer[K, V]) start() {
	c := &r.c
	c.index.reset(len(c.hashes))
	c.pairs, c.hashes, c.first = make([]Pair[K, V], 0, len(c.hashes)), c.hashes[:0], c.first[:0]
}

func (r *reducer[K, V]) add(k K, v V) {
	i, added := r.c.keyPos(k, firstAt{})
	if added {
		r.c.pairs[i].Value = v
		return
	}
	r.c.pairs[i].Value = r.reduce(r.c.pairs[i].Value, v)
}

// out returns the pairs combined since start, which r no longer holds.
func (r *reducer[K, V]) out() []Pair[K, V] {
	out := r.c.pairs
	r.c.pairs = nil
	return out
}

// ReduceByKey returns, for every batch of s, one pair per key with the
// values of that key combined by reduce, which must be associative and
// commutative, as in Spark. Pairs are in the order their keys first appear
// in the batch (as ForEachBatch sees it), whatever Config.Parallelism; the
// result's batch has one part.
//
// It runs as a shuffle: each partition of s is combined by key in a task of
// its own, the combined pairs are hash-partitioned by key and each hash
// partition is reduced in a task of its own, or all of them by the last
// combining task when they hold few keys (see the Execution section of the
// package documentation). So reduce is called concurrently, and the
// values of a key are combined partition by partition, in order within
// each: a reduce that is not commutative would depend on how the records of
// shards interleave in blocks.
//
// It takes one Option, Quarantine: a record that a function fused into its
// tasks fails on (a Map, Filter, FlatMap or MapBatch before it, or reduce)
// is then set aside and the batch reduced without it, instead of stopping
// the pipeline (see Quarantine).
func ReduceByKey[K comparable, V any](s *Stream[Pair[K, V]], reduce func(V, V) V, opts ...Option) *Stream[Pair[K, V]] {
	mustExist("ReduceByKey", "s", s)
	requireFunc(s.p, "ReduceByKey", s.n, "reduce", reduce == nil)
	kd := reduceByKey[K](reduce)
	kd.dead = keyedQuarantine(s.p, "ReduceByKey of "+s.n.String(), opts)
	out := newPlanned(s.p, "ReduceByKey", s.n.slide, []*node{s.n}, kd.plan(s))
	kd.dead.named(out.n)
	return out
}

// keyedQuarantine returns the Quarantine opts give the keyed operator
// what, which takes no other Option, or nil.
func keyedQuarantine(p *Pipeline, what string, opts []Option) *keyedDead {
	o := applyOptions(opts)
	o.refuseOthers(p, what, keyedOptions)
	return newKeyedDead(p, what, o)
}

// reduceByKey returns the keyed operator of ReduceByKey.
func reduceByKey[K comparable, V any](reduce func(V, V) V) *keyed[Pair[K, V], K, V] {
	kd := &keyed[Pair[K, V], K, V]{seed: maphash.MakeSeed(), reduce: reduce}
	kd.combine = func(c *combined[K, V], in *parted[Pair[K, V]], part int) {
		at := firstAt{pos: -1}
		// The record's steps are written out in both ways of reading
		// in: a call of a shared closure a record costs more than the
		// lines.
		if in.fold != nil {
			in.fold(part, func(pos int, kv Pair[K, V]) {
				at.next(pos)
				if i, added := c.keyPos(kv.Key, at); added {
					c.pairs[i].Value = kv.Value
				} else {
					c.pairs[i].Value = reduce(c.pairs[i].Value, kv.Value)
				}
				at.off++
			})
			return
		}
		in.transient(part, func(pos int, chunk []Pair[K, V]) bool {
			at.next(pos)
			for _, kv := range chunk {
				if i, added := c.keyPos(kv.Key, at); added {
					c.pairs[i].Value = kv.Value
				} else {
					c.pairs[i].Value = reduce(c.pairs[i].Value, kv.Value)
				}
				at.off++
			}
			return true
		})
	}
	return kd
}

// CountByValue returns, for every batch of s, one pair per distinct record
// with the number of times it occurs in the batch, in the order the records
// first appear (as ForEachBatch sees them); the result's batch has one part.
// It runs as ReduceByKey does, and takes its Option, Quarantine.
func CountByValue[T comparable](s *Stream[T], opts ...Option) *Stream[Pair[T, int64]] {
	mustExist("CountByValue", "s", s)
	kd := &keyed[T, T, int64]{seed: maphash.MakeSeed(), reduce: func(a, b int64) int64 { return a + b },
		dead: keyedQuarantine(s.p, "CountByValue of "+s.n.String(), opts)}
	kd.combine = func(c *combined[T, int64], in *parted[T], part int) {
		at := firstAt{pos: -1}
		if in.fold != nil { // see reduceByKey
			in.fold(part, func(pos int, v T) {
				at.next(pos)
				i, _ := c.keyPos(v, at)
				c.pairs[i].Value++
				at.off++
			})
			return
		}
		in.transient(part, func(pos int, chunk []T) bool {
			at.next(pos)
			for _, v := range chunk {
				i, _ := c.keyPos(v, at)
				c.pairs[i].Value++
				at.off++
			}
			return true
		})
	}
	out := newPlanned(s.p, "CountByValue", s.n.slide, []*node{s.n}, kd.plan(s))
	kd.dead.named(out.n)
	return out
}
