package stream

import (
	"fmt"

	"github.com/weirstream/weir/batch"
)

// UpdateStateByKey returns a stream of per-key state kept across batches:
// after each batch of s, one pair per key that has state, with that state.
//
// For each batch, update is called once for every key that has state or
// values in the batch: with the key's values in the batch, in order (nil if
// none: keys with state are updated every batch even without new values),
// its state, and whether it had one (false for a new key, with the zero
// state). It returns the new state and whether to keep it: a key whose
// update returns keep false loses its state and is not in the output.
//
// Keys with state are updated first, in the order they got their state,
// then new keys in the order they first appear in the batch; the output
// pairs are in that order. State is held in memory and lost when the
// process ends.
func UpdateStateByKey[K comparable, V, S any](s *Stream[Pair[K, V]], update func(key K, values []V, state S, exists bool) (newState S, keep bool)) *Stream[Pair[K, S]] {
	requireFunc(s.p, "UpdateStateByKey", s.n, "update", update == nil)
	st := &keyState[K, V, S]{update: update, vals: make(map[K]S)}
	var out *Stream[Pair[K, S]]
	out = newStatefulStream(s.p, "UpdateStateByKey", s.n.slide, []*node{s.n}, func(r *run) (*batch.Batch[Pair[K, S]], error) {
		if st.last == nil || st.last.Time() != r.job.time {
			return nil, fmt.Errorf("%v: no state computed for this batch", out.n)
		}
		return st.last, nil
	}, func(r *run) error {
		b, err := s.at(r)
		if err != nil || b == nil {
			return err
		}
		st.apply(b)
		return nil
	})
	return out
}

// keyState is the state of an UpdateStateByKey.
type keyState[K comparable, V, S any] struct {
	update func(K, []V, S, bool) (S, bool)
	vals   map[K]S
	keys   []K // keys of vals, in the order they got state
	last   *batch.Batch[Pair[K, S]]
}

// apply updates the state with batch b and remembers the resulting pairs.
func (st *keyState[K, V, S]) apply(b *batch.Batch[Pair[K, V]]) {
	groups := make(map[K][]V)
	var newKeys []K
	for kv := range b.All() {
		vs, seen := groups[kv.Key]
		if !seen {
			if _, has := st.vals[kv.Key]; !has {
				newKeys = append(newKeys, kv.Key)
			}
		}
		groups[kv.Key] = append(vs, kv.Value)
	}
	kept := st.keys[:0]
	for _, k := range st.keys {
		if ns, keep := st.update(k, groups[k], st.vals[k], true); keep {
			st.vals[k] = ns
			kept = append(kept, k)
		} else {
			delete(st.vals, k)
		}
	}
	clear(st.keys[len(kept):])
	st.keys = kept
	var zero S
	for _, k := range newKeys {
		if ns, keep := st.update(k, groups[k], zero, false); keep {
			st.vals[k] = ns
			st.keys = append(st.keys, k)
		}
	}
	out := make([]Pair[K, S], len(st.keys))
	for i, k := range st.keys {
		out[i] = Pair[K, S]{Key: k, Value: st.vals[k]}
	}
	st.last = batch.Derive(b, out)
}
