package stream

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/panics"
)

// State is the state of one key in a MapWithState function: whether it
// exists, its value, and whether the call is the last one of a key that
// timed out. It is valid only during the call it is given to.
type State[S any] struct {
	value     S
	exists    bool
	timingOut bool
	err       error // misuse, reported as the batch's error
}

// Exists reports whether the key has a state.
func (s *State[S]) Exists() bool { return s.exists }

// Get returns the key's state, or the zero S if it has none.
func (s *State[S]) Get() S { return s.value }

// Update sets the key's state. It must not be called on a state that is
// timing out (the key's state is removed after that call whatever it
// does): doing so fails the batch.
func (s *State[S]) Update(v S) {
	if s.timingOut {
		s.err = errors.New("State.Update called on a state that is timing out: a timed-out key's state is removed; check IsTimingOut")
		return
	}
	s.value, s.exists = v, true
}

// Remove removes the key's state. Removing a state that is timing out is
// allowed and changes nothing.
func (s *State[S]) Remove() {
	var zero S
	s.value, s.exists = zero, false
}

// IsTimingOut reports whether this call is the one MapWithState makes for a
// key idle for its StateTimeout: there is no value, and the state is
// removed after the call.
func (s *State[S]) IsTimingOut() bool { return s.timingOut }

// StateTimeout is an option of MapWithState: a key that has had no value
// for at least d of batch time gets its function called once more, with a
// timing-out state and the zero value, at the first batch at least d after
// its last value, and then loses its state. d must be a positive multiple
// of the batch interval (Run refuses 0, or any other d, naming the fix):
// leave the option out for no timeout, the default.
func StateTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout, o.given = d, o.given|optStateTimeout }
}

// MapWithState keeps a state per key across batches, as Spark's
// mapWithState: for every pair of every batch of s, in order, f is called
// with the pair's key and value and the key's *State, which it may read,
// Update or Remove; what it returns is emitted (if emit) on the first
// returned stream, the mapped stream, in call order. With StateTimeout, a
// key idle for the timeout gets one more call with a timing-out state (see
// State.IsTimingOut), whose result is emitted too, after the batch's pairs.
//
// The second returned stream has, after every batch, one pair per key with
// a state and that state, in the order the keys got their state (Spark's
// stateSnapshots: records of the stream, not the snapshots a recovery log
// keeps, see Config.StateSnapshotInterval).
//
// With Config.Recovery the states (and the batch time of each key's last
// value, for the timeout) survive a crash exactly, as UpdateStateByKey's: f
// sees every pair once, in a run that was interrupted as in one that was
// not. The timeout is measured in batch time, so a replay times out the
// same keys. Keys and states are encoded with GobCodec unless StateCodec
// options give other codecs; Run refuses to start if they cannot be
// encoded.
//
// With Quarantine, a record that the functions before it, or f, fail on is
// set aside, its key's state as it was (see Quarantine).
func MapWithState[K comparable, V, S, U any](s *Stream[Pair[K, V]], f func(key K, value V, state *State[S]) (out U, emit bool), opts ...Option) (mapped *Stream[U], snapshots *Stream[Pair[K, S]]) {
	mustExist("MapWithState", "s", s)
	requireFunc(s.p, "MapWithState", s.n, "f", f == nil)
	o := applyOptions(opts)
	o.refuseOthers(s.p, "MapWithState of "+s.n.String(), mapWithStateOptions)
	bi := s.p.cfg.BatchInterval
	if d := o.timeout; o.given&optStateTimeout != 0 && (d <= 0 || d%bi != 0) {
		fix := max(bi, (d+bi-1)/bi*bi)
		s.p.graphError(fmt.Errorf("MapWithState of %v: StateTimeout %v: must be a positive multiple of the batch interval (%v), such as %v; leave StateTimeout out for no timeout",
			s.n, d, bi, fix))
		o.timeout = 0
	}
	cs := newCodecSet(o)
	st := &mapState[K, V, S, U]{f: f, timeout: o.timeout, vals: make(map[K]*keyEntry[S]),
		kc: codecFor[K](cs), sc: codecFor[S](cs), vptr: mayHoldPointers(reflect.TypeFor[V]())}
	cs.unused(s.p, "MapWithState", s.n)
	dead := newKeyedDead(s.p, "MapWithState of "+s.n.String(), o)
	st.catch = dead != nil
	tick := func(r *run) error {
		return stateTick(r, dead, s, st.apply, func() []DeadLetter { return st.letters })
	}
	mapped = newStatefulStream(s.p, "MapWithState", s.n.slide, []*node{s.n}, func(r *run) (*batch.Batch[U], error) {
		if st.out == nil || st.out.Time() != r.job.time {
			return nil, fmt.Errorf("%v: no state computed for this batch", mapped.n)
		}
		return st.out, nil
	}, tick)
	mapped.n.keepState(st)
	mapped.n.keyedByShard = o.partitioned
	dead.named(mapped.n)
	snapshots = newStream(s.p, "MapWithState(snapshots)", s.n.slide, []*node{mapped.n}, func(r *run) (*batch.Batch[Pair[K, S]], error) {
		if _, err := mapped.at(r); err != nil {
			return nil, err
		}
		return st.snapshots(), nil
	})
	st.snapsNode = snapshots.n
	return mapped, snapshots
}

// keyEntry is one key's state in a MapWithState.
type keyEntry[S any] struct {
	v    S
	last batch.Time // batch time of the key's last value
	gone bool       // the key lost this state (it may have another)
}

// mapState is the state of a MapWithState.
type mapState[K comparable, V, S, U any] struct {
	f         func(K, V, *State[S]) (U, bool)
	timeout   time.Duration
	vals      map[K]*keyEntry[S]
	keys      []K  // keys of vals, in the order they got state; may hold removed keys until compacted
	removed   bool // a key lost its state since keys was compacted
	kc        Codec[K]
	sc        Codec[S]
	out       *batch.Batch[U]
	snap      *batch.Batch[Pair[K, S]] // made by snapshots, for the batch of out
	snapsNode *node                    // the snapshots stream's
	state     State[S]                 // the State of the current call
	// shards, when the state is kept per shard (pershard.go), places the
	// keys; the pairs of a new key of a shard not loaded are left out.
	shards *shardKeys[K]
	// tasks are the map tasks of apply, kept from batch to batch as a
	// shuffle's map tasks are.
	tasks []*mapTask[K, V, S]
	// pos and dense index the keys of vals for the map tasks, which note a
	// record's key as an int32, so that what they keep holds no pointer
	// (for a V without any) for the garbage collector to scan: dense[i] is
	// a key and its entry, pos[k] the position in dense of key k, which
	// has state. An entry that loses its state stays in dense, one of its
	// holes, until dense is made anew, when holes are more than half of
	// it; a key that gets state is added. dirty says they must be made
	// anew from vals and keys, which changed otherwise.
	pos   map[K]int32
	dense []denseEntry[K, S]
	holes int
	dirty bool
	// vptr says V may hold pointers: the map tasks' values are then
	// cleared after each batch, to let go of what they point to.
	vptr bool
	// catch is set with the operator's Quarantine: a panic of f on a
	// record is then the record's letter, in letters (the batch's).
	catch   bool
	letters []DeadLetter
}

// denseEntry is a key of a MapWithState and its entry (see mapState.dense).
type denseEntry[K comparable, S any] struct {
	key K
	e   *keyEntry[S]
}

// mapTask is what a map task of mapState.apply notes of its partition:
// for record j, its value, vals[j], and its key, ids[j]: a position in
// mapState.dense for a key that had state when the batch started, or ^i
// for the key missed[i]; and its runs of records by position (see
// stateRun).
type mapTask[K comparable, V, S any] struct {
	ids    []int32
	vals   []V
	missed []K
	runs   []stateRun
}

// index makes pos and dense anew from keys and vals, if they are not
// up to date.
func (st *mapState[K, V, S, U]) index() {
	if !st.dirty && st.pos != nil && len(st.dense)-st.holes == len(st.vals) && st.holes <= len(st.dense)/2 {
		return
	}
	if st.pos == nil {
		st.pos = make(map[K]int32, len(st.keys))
	}
	clear(st.pos)
	clear(st.dense)
	st.dense = st.dense[:0]
	for _, k := range st.keys {
		if e := st.vals[k]; e != nil {
			st.pos[k] = int32(len(st.dense))
			st.dense = append(st.dense, denseEntry[K, S]{k, e})
		}
	}
	st.holes, st.dirty = 0, false
}

// call calls f for key with its state, e (nil if it has none), and
// applies what f did to it.
func (st *mapState[K, V, S, U]) call(t batch.Time, k K, v V, e *keyEntry[S], timingOut bool, out *[]U) error {
	has := e != nil
	// One State for every call: f may not keep it, and given to f, a new
	// one would be allocated every call.
	state := &st.state
	*state = State[S]{exists: has, timingOut: timingOut}
	if has {
		state.value = e.v
	}
	var u U
	var emit bool
	if st.catch && !timingOut {
		var failed bool
		if u, emit, failed = st.catching(k, v, state); failed {
			return nil // quarantined: the key's state is as it was
		}
	} else {
		u, emit = st.f(k, v, state)
	}
	if state.err != nil {
		return fmt.Errorf("key %v: %w", k, state.err)
	}
	if emit {
		*out = append(*out, u)
	}
	switch {
	case timingOut || !state.exists:
		if has {
			st.remove(k, e)
		}
	case has:
		e.v, e.last = state.value, t
	default:
		e := &keyEntry[S]{v: state.value, last: t}
		st.vals[k] = e
		st.keys = append(st.keys, k)
		if st.pos != nil && !st.dirty {
			st.pos[k] = int32(len(st.dense))
			st.dense = append(st.dense, denseEntry[K, S]{k, e})
		}
	}
	return nil
}

// remove removes key k's state, e.
func (st *mapState[K, V, S, U]) remove(k K, e *keyEntry[S]) {
	delete(st.vals, k)
	e.gone, st.removed = true, true
	if st.pos != nil && !st.dirty {
		delete(st.pos, k)
		st.holes++
	}
}

// catching calls f on a record, for an operator with Quarantine (catch;
// not a timing-out call, which has no record): a panic of f becomes the
// record's letter, in st.letters, and failed is true.
func (st *mapState[K, V, S, U]) catching(k K, v V, state *State[S]) (u U, emit, failed bool) {
	defer func() {
		if p := recover(); p != nil {
			st.letters = append(st.letters, letterOf(Pair[K, V]{Key: k, Value: v}, panics.Recovered(p)))
			var zero U
			u, emit, failed = zero, false, true
		}
	}()
	u, emit = st.f(k, v, state)
	return u, emit, false
}

// apply runs f on the batch in and times out the idle keys. One map task
// per partition of in, fused with the narrow operators before it, looks
// each record's key up in the state (only read then), in parallel; then f
// is called record by record, in batch order, with the state found, or
// looked up again if the key lost it or had none then.
func (st *mapState[K, V, S, U]) apply(ctx context.Context, par int, in *parted[Pair[K, V]]) error {
	for len(st.tasks) < len(in.keys) {
		st.tasks = append(st.tasks, &mapTask[K, V, S]{})
	}
	tasks := st.tasks[:len(in.keys)]
	st.index()
	defer func() { // also when a map task fails
		for _, tk := range tasks {
			clear(tk.missed) // let go of the keys and values
			if st.vptr {
				clear(tk.vals)
			}
		}
	}()
	err := parallel(ctx, par, len(tasks), func(_ context.Context, i int) error {
		t := tasks[i]
		t.ids, t.vals, t.missed, t.runs = t.ids[:0], t.vals[:0], t.missed[:0], t.runs[:0]
		return in.mapTaskError(i, safely(func() error {
			pos := st.pos
			in.transient(i, func(p int, recs []Pair[K, V]) bool {
				for _, kv := range recs {
					id, ok := pos[kv.Key]
					if !ok {
						id = ^int32(len(t.missed))
						t.missed = append(t.missed, kv.Key)
					}
					t.ids = append(t.ids, id)
					t.vals = append(t.vals, kv.Value)
				}
				t.runs = noteRun(t.runs, i, p, len(t.ids))
				return true
			})
			return nil
		}))
	})
	if err != nil {
		return err
	}
	var runs []stateRun
	n := 0
	for _, tk := range tasks {
		runs = append(runs, tk.runs...)
		n += len(tk.ids)
	}
	t := in.time
	out := make([]U, 0, n)
	st.letters = nil
	inBatchOrder(runs, len(tasks), func(task int, from, to int32) {
		tk := tasks[task]
		vals := tk.vals[from:to]
		o := out // in a register, not the closure's variable
		var k K  // the key of the record f is called on
		defer func() {
			out = o
			if p := recover(); p != nil { // f panicked, not set aside (call)
				err = keyPanic(k, in.keys[task].shard, panics.Recovered(p), mapWithStateFix)
			}
		}()
		for j, id := range tk.ids[from:to] {
			if err != nil {
				return
			}
			var e *keyEntry[S]
			if id >= 0 {
				d := &st.dense[id]
				k, e = d.key, d.e
			} else {
				k = tk.missed[^id]
			}
			if e == nil || e.gone {
				e = st.vals[k]
			}
			if e == nil || st.catch {
				if e == nil && st.shards != nil && !st.shards.owns(k) {
					continue
				}
				n := len(st.letters)
				err = st.call(t, k, vals[j], e, false, &o)
				if len(st.letters) > n { // the record is quarantined: name its shard
					pk := in.keys[task]
					st.letters[n].Range = batch.SeqRange{Stream: pk.stream, Shard: pk.shard}
				}
				continue
			}
			// call, for a key with state and no Quarantine.
			state := &st.state
			*state = State[S]{value: e.v, exists: true}
			u, emit := st.f(k, vals[j], state)
			if state.err != nil {
				err = fmt.Errorf("key %v: %w", k, state.err)
				return
			}
			if emit {
				o = append(o, u)
			}
			if state.exists {
				e.v, e.last = state.value, t
			} else {
				st.remove(k, e)
			}
		}
	})
	if err != nil {
		return err
	}
	// A key removed and added again within the batch is in keys twice:
	// compact, keeping each live key's first position. Without removals,
	// keys holds each key once.
	var zero V
	if st.removed {
		kept := st.keys[:0]
		seen := make(map[K]bool, len(st.vals))
		for _, k := range st.keys {
			if _, ok := st.vals[k]; ok && !seen[k] {
				seen[k] = true
				kept = append(kept, k)
			}
		}
		clear(st.keys[len(kept):])
		st.keys, st.removed = kept, false
	}
	if st.timeout > 0 {
		for _, k := range st.keys {
			if e := st.vals[k]; e != nil && t.Std().Sub(e.last.Std()) >= st.timeout {
				err := panics.Call(func() error { return st.call(t, k, zero, e, true, &out) })
				if pe, ok := err.(*panicError); ok {
					return keyPanic(k, "", pe, timeoutFix)
				}
				if err != nil {
					return err
				}
			}
		}
		kept := st.keys[:0]
		for _, k := range st.keys {
			if _, ok := st.vals[k]; ok {
				kept = append(kept, k)
			}
		}
		clear(st.keys[len(kept):])
		st.keys, st.removed = kept, false
	}
	st.out = batch.New(in.time, in.blocks, out)
	st.snap = nil
	return nil
}

// snapshots returns the batch of the snapshots stream for the batch last
// applied: one pair per key with its state. It is made only if asked for:
// the state does not change until the next batch is applied.
func (st *mapState[K, V, S, U]) snapshots() *batch.Batch[Pair[K, S]] {
	if st.snap == nil {
		pairs := make([]Pair[K, S], len(st.keys))
		for i, k := range st.keys {
			pairs[i] = Pair[K, S]{Key: k, Value: st.vals[k].v}
		}
		st.snap = batch.Derive(st.out, pairs)
	}
	return st.snap
}

// quiet: for an empty batch f is called only for the keys that time out;
// the snapshots hold every key, so they must be empty or unused.
func (st *mapState[K, V, S, U]) quiet(t batch.Time, used func(*node) bool) bool {
	if len(st.vals) == 0 {
		return true
	}
	if used(st.snapsNode) {
		return false
	}
	for _, e := range st.vals {
		if st.timeout > 0 && t.Std().Sub(e.last.Std()) >= st.timeout {
			return false
		}
	}
	return true
}

func (st *mapState[K, V, S, U]) check() error {
	return errors.Join(checkCodec(st.kc), checkCodec(st.sc))
}

// snapshot encodes the keys in order, their states and last value times.
func (st *mapState[K, V, S, U]) snapshot() ([]byte, error) { return st.encodeKeys(st.keys) }

// encodeKeys encodes the last value times of keys, the keys, in order,
// then their states.
func (st *mapState[K, V, S, U]) encodeKeys(keys []K) ([]byte, error) {
	var w snapWriter
	w.uint(uint64(len(keys)))
	states := make([]S, len(keys))
	for i, k := range keys {
		e := st.vals[k]
		states[i] = e.v
		w.int(int64(e.last))
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
func (st *mapState[K, V, S, U]) decode(data []byte) ([]K, []*keyEntry[S], error) {
	r := &snapReader{buf: data}
	lasts := make([]batch.Time, r.count())
	for i := range lasts {
		lasts[i] = batch.Time(r.int())
	}
	keys := snapRead(r, st.kc, len(lasts))
	states := snapRead(r, st.sc, len(lasts))
	if err := r.done(); err != nil {
		return nil, nil, err
	}
	entries := make([]*keyEntry[S], len(keys))
	for i := range keys {
		entries[i] = &keyEntry[S]{v: states[i], last: lasts[i]}
	}
	return keys, entries, nil
}

func (st *mapState[K, V, S, U]) restore(data []byte) error {
	keys, entries, err := st.decode(data)
	if err != nil {
		return err
	}
	st.keys, st.vals, st.out, st.snap = keys, make(map[K]*keyEntry[S], len(keys)), nil, nil
	st.dirty = true
	for i, k := range keys {
		st.vals[k] = entries[i]
	}
	return nil
}

// byShard implements shardKeyed.
func (st *mapState[K, V, S, U]) byShard(n *node) shardView {
	if st.shards = newShardKeys[K](n); st.shards == nil {
		return nil
	}
	return keyedView[K]{x: st.shards, st: st}
}

// keyList returns the keys with state, in order (compacted: keys may hold
// removed keys only during a batch).
func (st *mapState[K, V, S, U]) keyList() []K { return st.keys }

func (st *mapState[K, V, S, U]) mergeKeys(data []byte, keep func(K) bool) error {
	keys, entries, err := st.decode(data)
	if err == nil {
		st.keys, st.snap = mergeKeyed(st.keys, st.vals, keys, entries, keep), nil
		st.dirty = true
	}
	return err
}

func (st *mapState[K, V, S, U]) mergeAs(data []byte, key K) error {
	_, entries, err := st.decode(data)
	if err == nil {
		st.keys = mergeAsKeyed(st.keys, st.vals, entries, key, func(dst, src *keyEntry[S]) *keyEntry[S] {
			dst.v, dst.last = mergeValue(dst.v, src.v), max(dst.last, src.last)
			return dst
		})
		st.snap = nil
		st.dirty = true
	}
	return err
}

func (st *mapState[K, V, S, U]) removeKeys(drop func(K) bool) {
	st.keys, st.snap = removeKeyed(st.keys, st.vals, drop), nil
	st.dirty = true
}
