package stream

import (
	"errors"
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
// pairs are in that order.
//
// The state is held in memory. With Config.Recovery it survives a crash
// exactly: it is snapshotted every Config.StateCheckpointInterval, and a
// restart loads the last snapshot and recomputes the batches after it, so
// update sees every batch once, as in a run never interrupted. Keys and
// states are encoded with GobCodec unless a StateCodec option gives another
// codec for their type; Run refuses to start if they cannot be encoded.
func UpdateStateByKey[K comparable, V, S any](s *Stream[Pair[K, V]], update func(key K, values []V, state S, exists bool) (newState S, keep bool), opts ...Option) *Stream[Pair[K, S]] {
	requireFunc(s.p, "UpdateStateByKey", s.n, "update", update == nil)
	cs := newCodecSet(applyOptions(opts))
	st := &keyState[K, V, S]{update: update, vals: make(map[K]S), kc: codecFor[K](cs), sc: codecFor[S](cs)}
	cs.unused(s.p, "UpdateStateByKey", s.n)
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
	out.n.state = st
	return out
}

// keyState is the state of an UpdateStateByKey.
type keyState[K comparable, V, S any] struct {
	update func(K, []V, S, bool) (S, bool)
	vals   map[K]S
	keys   []K // keys of vals, in the order they got state
	last   *batch.Batch[Pair[K, S]]
	kc     Codec[K]
	sc     Codec[S]
}

func (st *keyState[K, V, S]) check() error {
	return errors.Join(checkCodec(st.kc), checkCodec(st.sc))
}

// snapshot encodes the keys, in order, then their states.
func (st *keyState[K, V, S]) snapshot() ([]byte, error) {
	var w snapWriter
	w.uint(uint64(len(st.keys)))
	states := make([]S, len(st.keys))
	for i, k := range st.keys {
		states[i] = st.vals[k]
	}
	if err := snapValues(&w, st.kc, st.keys); err != nil {
		return nil, err
	}
	if err := snapValues(&w, st.sc, states); err != nil {
		return nil, err
	}
	return w.buf, nil
}

func (st *keyState[K, V, S]) restore(data []byte) error {
	r := &snapReader{buf: data}
	n := r.count()
	keys := snapRead(r, st.kc, n)
	states := snapRead(r, st.sc, n)
	if err := r.done(); err != nil {
		return err
	}
	st.keys, st.vals, st.last = keys, make(map[K]S, n), nil
	for i, k := range keys {
		st.vals[k] = states[i]
	}
	return nil
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
