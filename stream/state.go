package stream

import (
	"errors"
	"fmt"
	"hash/maphash"

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
// exactly: it is snapshotted every Config.StateSnapshotInterval, and a
// restart loads the last snapshot and recomputes the batches after it, so
// update sees every batch once, as in a run never interrupted. Keys and
// states are encoded with GobCodec unless a StateCodec option gives another
// codec for their type; Run refuses to start if they cannot be encoded.
func UpdateStateByKey[K comparable, V, S any](s *Stream[Pair[K, V]], update func(key K, values []V, state S, exists bool) (newState S, keep bool), opts ...Option) *Stream[Pair[K, S]] {
	requireFunc(s.p, "UpdateStateByKey", s.n, "update", update == nil)
	cs := newCodecSet(applyOptions(opts))
	st := &keyState[K, V, S]{update: update, vals: make(map[K]S), kc: codecFor[K](cs), sc: codecFor[S](cs),
		groups: &combined[K, int32]{seed: maphash.MakeSeed()}}
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
	out.n.keepState(st)
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
	// groups indexes the keys of a batch, with their numbers of values,
	// kept from batch to batch as a shuffle's map tasks are.
	groups *combined[K, int32]
	// shards, when the state is kept per shard (pershard.go), places the
	// keys; a new key of a shard not loaded gets no state.
	shards *shardKeys[K]
}

// quiet: with no key, update is not called for an empty batch.
func (st *keyState[K, V, S]) quiet(batch.Time, func(*node) bool) bool { return len(st.vals) == 0 }

func (st *keyState[K, V, S]) check() error {
	return errors.Join(checkCodec(st.kc), checkCodec(st.sc))
}

// snapshot encodes the keys, in order, then their states.
func (st *keyState[K, V, S]) snapshot() ([]byte, error) { return st.encodeKeys(st.keys) }

// encodeKeys encodes keys, in order, then their states.
func (st *keyState[K, V, S]) encodeKeys(keys []K) ([]byte, error) {
	var w snapWriter
	w.uint(uint64(len(keys)))
	states := make([]S, len(keys))
	for i, k := range keys {
		states[i] = st.vals[k]
	}
	if err := snapValues(&w, st.kc, keys); err != nil {
		return nil, err
	}
	if err := snapValues(&w, st.sc, states); err != nil {
		return nil, err
	}
	return w.buf, nil
}

// decode decodes what encodeKeys encoded.
func (st *keyState[K, V, S]) decode(data []byte) ([]K, []S, error) {
	r := &snapReader{buf: data}
	n := r.count()
	keys := snapRead(r, st.kc, n)
	states := snapRead(r, st.sc, n)
	return keys, states, r.done()
}

func (st *keyState[K, V, S]) restore(data []byte) error {
	keys, states, err := st.decode(data)
	if err != nil {
		return err
	}
	st.keys, st.vals, st.last = keys, make(map[K]S, len(keys)), nil
	for i, k := range keys {
		st.vals[k] = states[i]
	}
	return nil
}

// byShard implements shardKeyed.
func (st *keyState[K, V, S]) byShard(n *node) shardView {
	if st.shards = newShardKeys[K](n); st.shards == nil {
		return nil
	}
	return keyedView[K]{x: st.shards, st: st}
}

func (st *keyState[K, V, S]) keyList() []K { return st.keys }

func (st *keyState[K, V, S]) mergeKeys(data []byte, keep func(K) bool) error {
	keys, states, err := st.decode(data)
	if err == nil {
		st.keys = mergeKeyed(st.keys, st.vals, keys, states, keep)
	}
	return err
}

func (st *keyState[K, V, S]) mergeAs(data []byte, key K) error {
	_, states, err := st.decode(data)
	if err == nil {
		st.keys = mergeAsKeyed(st.keys, st.vals, states, key, mergeValue[S])
	}
	return err
}

func (st *keyState[K, V, S]) removeKeys(drop func(K) bool) {
	st.keys = removeKeyed(st.keys, st.vals, drop)
}

// apply updates the state with batch b and remembers the resulting pairs.
func (st *keyState[K, V, S]) apply(b *batch.Batch[Pair[K, V]]) {
	g, vals, ends := st.group(b)
	values := func(i int32) []V {
		if i < 0 {
			return nil
		}
		start := int32(0)
		if i > 0 {
			start = ends[i-1]
		}
		return vals[start:ends[i]:ends[i]]
	}
	// The batch's keys that have state, found before any update: the
	// others are the new keys.
	groupOf := make([]int32, len(st.keys))
	has := make([]bool, len(g.pairs))
	newKeys := len(g.pairs)
	for j, k := range st.keys {
		i, _ := g.find(k, maphash.Comparable(g.seed, k))
		if groupOf[j] = i; i >= 0 {
			has[i] = true
			newKeys--
		}
	}
	out := make([]Pair[K, S], 0, len(st.keys)+newKeys)
	kept := st.keys[:0]
	for j, k := range st.keys {
		if ns, keep := st.update(k, values(groupOf[j]), st.vals[k], true); keep {
			st.vals[k] = ns
			kept = append(kept, k)
			out = append(out, Pair[K, S]{Key: k, Value: ns})
		} else {
			delete(st.vals, k)
		}
	}
	clear(st.keys[len(kept):])
	st.keys = kept
	var zero S
	for i := range g.pairs {
		if has[i] {
			continue
		}
		k := g.pairs[i].Key
		if !st.shards.owns(k) {
			continue
		}
		if ns, keep := st.update(k, values(int32(i)), zero, false); keep {
			st.vals[k] = ns
			st.keys = append(st.keys, k)
			out = append(out, Pair[K, S]{Key: k, Value: ns})
		}
	}
	clear(g.pairs) // let go of the keys
	g.pairs = g.pairs[:0]
	st.last = batch.Derive(b, out)
}

// group returns the keys of b's pairs in st.groups, in the order they
// first appear, and their values: those of the key at i in g.pairs are
// vals[ends[i-1]:ends[i]] (from 0 for i = 0), in batch order.
func (st *keyState[K, V, S]) group(b *batch.Batch[Pair[K, V]]) (g *combined[K, int32], vals []V, ends []int32) {
	g = st.groups
	g.index.reset(cap(g.pairs)) // the room of the largest batch so far
	g.pairs, g.hashes, g.first = g.pairs[:0], g.hashes[:0], g.first[:0]
	// Each record's key, then where each key's values go: counted, then
	// placed.
	keyOf := make([]int32, b.Len())
	n := 0
	for kv := range b.All() {
		i, _ := g.keyPos(kv.Key, firstAt{})
		g.pairs[i].Value++
		keyOf[n] = i
		n++
	}
	ends = make([]int32, len(g.pairs))
	next := int32(0)
	for i := range g.pairs {
		// From here, a key's Value is where its next value goes.
		next, g.pairs[i].Value = next+g.pairs[i].Value, next
		ends[i] = next
	}
	vals = make([]V, n)
	n = 0
	for kv := range b.All() {
		p := &g.pairs[keyOf[n]]
		vals[p.Value] = kv.Value
		p.Value++
		n++
	}
	return g, vals, ends
}
