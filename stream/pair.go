package stream

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/batch"
)

// Pair is a keyed record: the element type of the streams ReduceByKey,
// CountByValue, ReduceByKeyAndWindow and UpdateStateByKey work on.
type Pair[K comparable, V any] struct {
	Key   K
	Value V
}

// String formats p as "(key, value)".
func (p Pair[K, V]) String() string { return fmt.Sprintf("(%v, %v)", p.Key, p.Value) }

// reducer combines the values of pairs by key, remembering the order in
// which keys first appeared so its result is deterministic.
type reducer[K comparable, V any] struct {
	reduce func(V, V) V
	index  map[K]int
	out    []Pair[K, V]
}

func newReducer[K comparable, V any](reduce func(V, V) V) *reducer[K, V] {
	return &reducer[K, V]{reduce: reduce, index: make(map[K]int)}
}

func (r *reducer[K, V]) add(k K, v V) {
	if i, ok := r.index[k]; ok {
		r.out[i].Value = r.reduce(r.out[i].Value, v)
		return
	}
	r.index[k] = len(r.out)
	r.out = append(r.out, Pair[K, V]{Key: k, Value: v})
}

// ReduceByKey returns, for every batch of s, one pair per key with the
// values of that key combined by reduce, which must be associative. Pairs
// are in the order their keys first appear in the batch; the result has one
// part.
func ReduceByKey[K comparable, V any](s *Stream[Pair[K, V]], reduce func(V, V) V) *Stream[Pair[K, V]] {
	requireFunc(s.p, "ReduceByKey", s.n, "reduce", reduce == nil)
	hint := 0 // keys of the previous batch, to size this one's
	return derive(s, "ReduceByKey", func(_ context.Context, b *batch.Batch[Pair[K, V]]) (*batch.Batch[Pair[K, V]], error) {
		out := reduceBatch(b, reduce, hint)
		hint = len(out)
		return batch.Derive(b, out), nil
	})
}

func reduceBatch[K comparable, V any](b *batch.Batch[Pair[K, V]], reduce func(V, V) V, hint int) []Pair[K, V] {
	r := &reducer[K, V]{reduce: reduce, index: make(map[K]int, hint), out: make([]Pair[K, V], 0, hint)}
	for _, p := range b.Parts() {
		for _, kv := range p {
			r.add(kv.Key, kv.Value)
		}
	}
	return r.out
}

// CountByValue returns, for every batch of s, one pair per distinct record
// with the number of times it occurs in the batch, in the order the records
// first appear; the result has one part.
func CountByValue[T comparable](s *Stream[T]) *Stream[Pair[T, int64]] {
	hint := 0 // distinct records of the previous batch, to size this one's
	return derive(s, "CountByValue", func(_ context.Context, b *batch.Batch[T]) (*batch.Batch[Pair[T, int64]], error) {
		index := make(map[T]int, hint)
		out := make([]Pair[T, int64], 0, hint)
		for _, p := range b.Parts() {
			for _, v := range p {
				if i, ok := index[v]; ok {
					out[i].Value++
					continue
				}
				index[v] = len(out)
				out = append(out, Pair[T, int64]{Key: v, Value: 1})
			}
		}
		hint = len(out)
		return batch.Derive(b, out), nil
	})
}
