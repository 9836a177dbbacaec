package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"reflect"
	"slices"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/panics"
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
// The values slice is valid only during the call: when the state's type
// holds no pointer, its memory is used again for the next batch. To keep
// values elsewhere (a global, a channel, a goroutine), copy the elements;
// returning the slice inside the new state is the one safe way to keep
// it as it is (the memory is then not used again).
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
//
// With Quarantine, a record that the functions before it fail on is set
// aside, and so are a key's values of a batch that update panics on, the
// key keeping its state (see Quarantine).
//
// The values are placed by key and update is called from one goroutine,
// so a batch of many values per key costs more than its map side. When
// update only folds the values into the state (a running count or sum),
// reduce them first: UpdateStateByKey(ReduceByKey(s, plus), update) gets
// one value per key and batch, and most of the work runs in parallel.
func UpdateStateByKey[K comparable, V, S any](s *Stream[Pair[K, V]], update func(key K, values []V, state S, exists bool) (newState S, keep bool), opts ...Option) *Stream[Pair[K, S]] {
	mustExist("UpdateStateByKey", "s", s)
	requireFunc(s.p, "UpdateStateByKey", s.n, "update", update == nil)
	o := applyOptions(opts)
	o.refuseOthers(s.p, "UpdateStateByKey of "+s.n.String(), stateOptions)
	cs := newCodecSet(o)
	st := newKeyState[K, V, S](update, codecFor[K](cs), codecFor[S](cs))
	cs.unused(s.p, "UpdateStateByKey", s.n)
	dead := newKeyedDead(s.p, "UpdateStateByKey of "+s.n.String(), o)
	st.catch = dead != nil
	var out *Stream[Pair[K, S]]
	out = newStatefulStream(s.p, "UpdateStateByKey", s.n.slide, []*node{s.n}, func(r *run) (*batch.Batch[Pair[K, S]], error) {
		if st.last == nil || st.last.Time() != r.job.time {
			return nil, fmt.Errorf("%v: no state computed for this batch", out.n)
		}
		return st.last, nil
	}, func(r *run) error {
		return stateTick(r, dead, s, st.apply, func() []DeadLetter { return st.letters })
	})
	out.n.keepState(st)
	dead.named(out.n)
	return out
}

// keyState is the state of an UpdateStateByKey.
//
// A batch is applied in two steps. The map side, one task per partition
// of the input, fused with the narrow operators before it, looks each
// record's key up in the keys with state (pos, only read then) or else
// adds it to the task's new keys, notes the record's key and value, and
// then sorts its values by key (a counting sort, in the task's own
// buffers). The driver then gathers each key's values, in batch order,
// and calls update key by key, in the order the operator documents.
type keyState[K comparable, V, S any] struct {
	update func(K, []V, S, bool) (S, bool)
	// held is the keys with state, in the order they got it, and their
	// states: held.pairs[i] is (key, state), indexed by key.
	held *combined[K, S]
	// pos is the position in held of each key with state: the map side
	// looks a record's key up in it, which takes one probe of a Go map
	// rather than held's index and then its pairs (the key's hash is
	// needed only for a key without state).
	pos  map[K]int32
	last *batch.Batch[Pair[K, S]]
	kc   Codec[K]
	sc   Codec[S]
	// tasks are the map tasks, and news the batch's new keys, kept from
	// batch to batch as a shuffle's map tasks are.
	tasks []*stateTask[K, V]
	news  *combined[K, int32]
	// shards, when the state is kept per shard (pershard.go), places the
	// keys; a new key of a shard not loaded gets no state.
	shards *shardKeys[K]
	// catch is set with the operator's Quarantine: a panic of update on a
	// key with values is then a letter per value, in letters (the
	// batch's).
	catch   bool
	letters []DeadLetter
	// vptr says V may hold pointers: the map tasks' values are then
	// cleared after each batch, to let go of what they point to.
	vptr bool
	// vals, when S holds no pointer, is the memory of the values update
	// is given, used again batch after batch: update may keep its values
	// only in the state it returns, and such a state cannot keep them.
	// With a state that may hold pointers, each batch's values are fresh.
	vals  []V
	reuse bool
}

// stateTask is what a map task of keyState.apply notes of its partition.
type stateTask[K comparable, V any] struct {
	// ids[j] is the key of the partition's record j: its position in
	// held, or ^i for the task's new key i (news.pairs[i]); vals[j] is its
	// value.
	ids  []int32
	vals []V
	// runs are the records of the partition by position, in order: the
	// records of run k are ids[runs[k-1].end:runs[k].end].
	runs []stateRun
	news *combined[K, int32] // the value of a new key is its id in keyState.news
	// sorted is vals by key, in order within each key, sorted by the task
	// itself: the values of its key x (a position in held, or len(held) +
	// i for its new key i) are sorted[off[x]:off[x+1]]. Both are the
	// task's own, used again batch after batch: the driver copies each
	// key's values out of them (see keyState.place).
	sorted []V
	off    []int32
	// inv numbers the batch's new keys as sortByKey does (see place).
	inv []int32
	// byKey says sorted and off are this batch's: the task sorts its
	// values only when it has at least as many records as keys to place
	// (held and its new ones), so that sorting, and place copying a key's
	// values task by task, cost no more than the records do, however
	// many keys and partitions there are.
	byKey bool
}

// sortByKey fills t.sorted and t.off from t.ids and t.vals, held the
// number of keys with state: a counting sort, stable.
func (t *stateTask[K, V]) sortByKey(held int) {
	keys := held + len(t.news.pairs)
	off := resize(t.off, keys+1)
	clear(off)
	for _, id := range t.ids {
		x := int(id)
		if id < 0 {
			x = held + int(^id)
		}
		off[x+1]++
	}
	for x := 1; x <= keys; x++ {
		off[x] += off[x-1]
	}
	// off[x] is where key x's next value goes, then where key x+1 starts:
	// shifted back after the placing.
	sorted := resize(t.sorted, len(t.vals))
	for j, id := range t.ids {
		x := int(id)
		if id < 0 {
			x = held + int(^id)
		}
		sorted[off[x]] = t.vals[j]
		off[x]++
	}
	copy(off[1:], off[:keys])
	off[0] = 0
	t.sorted, t.off = sorted, off
}

// stateRun is a run of a partition's records of one position.
type stateRun struct {
	pos, end int32
	task     int32
}

func newKeyState[K comparable, V, S any](update func(K, []V, S, bool) (S, bool), kc Codec[K], sc Codec[S]) *keyState[K, V, S] {
	st := &keyState[K, V, S]{update: update, kc: kc, sc: sc,
		held: &combined[K, S]{seed: maphash.MakeSeed()}, pos: make(map[K]int32)}
	st.news = &combined[K, int32]{seed: st.held.seed}
	st.vptr = mayHoldPointers(reflect.TypeFor[V]())
	st.reuse = !mayHoldPointers(reflect.TypeFor[S]())
	st.held.index.reset(0)
	return st
}

// hold gives key k state s: a new key after the others, a key with state
// replaced.
func (st *keyState[K, V, S]) hold(k K, s S) {
	st.holdHashed(k, maphash.Comparable(st.held.seed, k), s)
}

// holdHashed is hold for a key whose hash, by the state's seed, is h.
func (st *keyState[K, V, S]) holdHashed(k K, h uint64, s S) {
	i, added := st.held.keyPosHashed(k, h, firstAt{})
	st.held.pairs[i].Value = s
	if added {
		st.pos[k] = i
	}
}

// drop removes the keys for which drop(i) is true, i their position in
// held, keeping the others in order.
func (st *keyState[K, V, S]) drop(drop func(i int) bool) {
	n := len(st.held.pairs)
	st.held.retain(func(i int) bool { return !drop(i) })
	if len(st.held.pairs) < n {
		clear(st.pos)
		for i, kv := range st.held.pairs {
			st.pos[kv.Key] = int32(i)
		}
	}
}

// quiet: with no key, update is not called for an empty batch.
func (st *keyState[K, V, S]) quiet(batch.Time, func(*node) bool) bool { return len(st.held.pairs) == 0 }

func (st *keyState[K, V, S]) check() error {
	return errors.Join(checkCodec(st.kc), checkCodec(st.sc))
}

// snapshot encodes the keys, in order, then their states.
func (st *keyState[K, V, S]) snapshot() ([]byte, error) {
	keys, states := splitPairs(st.held.pairs)
	return st.encode(keys, states)
}

// encodeKeys encodes keys, which have state, in order, then their states.
func (st *keyState[K, V, S]) encodeKeys(keys []K) ([]byte, error) {
	h := st.held
	states := make([]S, len(keys))
	for i, k := range keys {
		if j, _ := h.find(k, maphash.Comparable(h.seed, k)); j >= 0 {
			states[i] = h.pairs[j].Value
		}
	}
	return st.encode(keys, states)
}

// encode encodes keys, in order, then states.
func (st *keyState[K, V, S]) encode(keys []K, states []S) ([]byte, error) {
	var w snapWriter
	w.uint(uint64(len(keys)))
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
	st.drop(func(int) bool { return true })
	st.last = nil
	for i, k := range keys {
		st.hold(k, states[i])
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

func (st *keyState[K, V, S]) keyList() []K {
	keys := make([]K, len(st.held.pairs))
	for i, kv := range st.held.pairs {
		keys[i] = kv.Key
	}
	return keys
}

func (st *keyState[K, V, S]) mergeKeys(data []byte, keep func(K) bool) error {
	keys, states, err := st.decode(data)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if keep(k) {
			st.hold(k, states[i])
		}
	}
	return nil
}

func (st *keyState[K, V, S]) mergeAs(data []byte, key K) error {
	_, states, err := st.decode(data)
	if err != nil {
		return err
	}
	h, hk := st.held, maphash.Comparable(st.held.seed, key)
	for _, s := range states {
		if i, added := h.keyPosHashed(key, hk, firstAt{}); added {
			h.pairs[i].Value = s
			st.pos[key] = i
		} else {
			h.pairs[i].Value = mergeValue(h.pairs[i].Value, s)
		}
	}
	return nil
}

func (st *keyState[K, V, S]) removeKeys(drop func(K) bool) {
	st.drop(func(i int) bool { return drop(st.held.pairs[i].Key) })
}

// task returns map task i, emptied, made from that of the previous batch.
func (st *keyState[K, V, S]) task(i int) *stateTask[K, V] {
	for len(st.tasks) <= i {
		st.tasks = append(st.tasks, &stateTask[K, V]{news: &combined[K, int32]{seed: st.held.seed}})
	}
	t := st.tasks[i]
	t.ids, t.vals, t.runs = t.ids[:0], t.vals[:0], t.runs[:0]
	t.news.empty()
	return t
}

// mapSide notes the records of partition i of in in map task t.
func (st *keyState[K, V, S]) mapSide(t *stateTask[K, V], in *parted[Pair[K, V]], i int) {
	held := st.pos
	at := firstAt{pos: -1}
	in.transient(i, func(pos int, recs []Pair[K, V]) bool {
		at.next(pos)
		for _, kv := range recs {
			id, ok := held[kv.Key]
			if !ok {
				h := maphash.Comparable(t.news.seed, kv.Key)
				j, slot := t.news.find(kv.Key, h)
				if j < 0 {
					j = t.news.insert(kv.Key, h, slot, at)
				}
				id = ^j
			}
			t.ids = append(t.ids, id)
			t.vals = append(t.vals, kv.Value)
			at.off++
		}
		t.runs = noteRun(t.runs, i, pos, len(t.ids))
		return true
	})
}

// noteRun returns runs, the runs of map task task so far, with the records
// before end noted as of position pos.
func noteRun(runs []stateRun, task, pos, end int) []stateRun {
	k, last := len(runs)-1, int32(0)
	if k >= 0 {
		last = runs[k].end
	}
	switch {
	case k >= 0 && runs[k].pos == int32(pos):
		runs[k].end = int32(end)
	case int32(end) > last:
		runs = append(runs, stateRun{pos: int32(pos), end: int32(end), task: int32(task)})
	}
	return runs
}

// inBatchOrder calls visit with the runs of records of every map task, the
// tasks' runs together in runs, in position order: the records of the
// batch as ForEachBatch sees them. Positions are each one partition's.
// It sorts runs.
func inBatchOrder(runs []stateRun, tasks int, visit func(task int, from, to int32)) {
	slices.SortFunc(runs, func(a, b stateRun) int { return cmp.Compare(a.pos, b.pos) })
	start := make([]int32, tasks) // where each task's next run starts
	for _, rn := range runs {
		visit(int(rn.task), start[rn.task], rn.end)
		start[rn.task] = rn.end
	}
}

// apply updates the state with the batch in and remembers the resulting
// pairs.
func (st *keyState[K, V, S]) apply(ctx context.Context, par int, in *parted[Pair[K, V]]) (rerr error) {
	tasks := make([]*stateTask[K, V], len(in.keys))
	for i := range tasks {
		tasks[i] = st.task(i)
	}
	defer func() { // also when a map task or update fails
		for _, t := range tasks {
			if st.vptr {
				clear(t.vals) // let go of the values
				clear(t.sorted)
			}
			clear(t.news.pairs)
		}
		clear(st.news.pairs)
		if st.vptr {
			clear(st.vals)
		}
	}()
	held := len(st.held.pairs)
	err := parallel(ctx, par, len(tasks), func(_ context.Context, i int) error {
		return in.mapTaskError(i, safely(func() error {
			t := tasks[i]
			st.mapSide(t, in, i)
			if t.byKey = held+len(t.news.pairs) <= len(t.ids); t.byKey {
				t.sortByKey(held)
			}
			return nil
		}))
	})
	if err != nil {
		return err
	}
	news := st.newKeys(tasks)
	values := st.place(tasks, news)
	out := make([]Pair[K, S], 0, held+len(news))
	var gone []bool // the keys that lose their state, if any
	st.letters = nil
	// A panic of update not set aside (invoke) fails the batch naming the
	// key update was called on.
	var calling K
	var with []V
	defer func() {
		if p := recover(); p != nil {
			rerr = keyPanic(calling, "", panics.Recovered(p), updateFix(len(with) > 0))
		}
	}()
	for i := range held {
		kv := &st.held.pairs[i]
		calling, with = kv.Key, values(i)
		ns, keep := st.invoke(kv.Key, with, kv.Value, true)
		if !keep {
			if gone == nil {
				gone = make([]bool, held)
			}
			gone[i] = true
			continue
		}
		kv.Value = ns
		out = append(out, Pair[K, S]{Key: kv.Key, Value: ns})
	}
	if gone != nil {
		st.drop(func(i int) bool { return gone[i] })
	}
	var zero S
	for _, id := range news {
		k, h := st.news.pairs[id].Key, st.news.hashes[id]
		if !st.shards.owns(k) {
			continue
		}
		calling, with = k, values(held+int(id))
		if ns, keep := st.invoke(k, with, zero, false); keep {
			st.holdHashed(k, h, ns)
			out = append(out, Pair[K, S]{Key: k, Value: ns})
		}
	}
	st.last = batch.New(in.time, in.blocks, out)
	return nil
}

// invoke calls update. With the operator's Quarantine (catch), a panic of
// update on a key with values in the batch becomes a letter per value, in
// st.letters, and the key keeps the state it had (a new key gets none);
// without values there is no record to set aside, and the panic fails the
// batch.
func (st *keyState[K, V, S]) invoke(k K, vs []V, s S, exists bool) (ns S, keep bool) {
	if !st.catch || len(vs) == 0 {
		return st.update(k, vs, s, exists)
	}
	defer func() {
		if p := recover(); p != nil {
			err := panics.Recovered(p)
			for _, v := range vs {
				st.letters = append(st.letters, letterOf(Pair[K, V]{Key: k, Value: v}, err))
			}
			ns, keep = s, exists
		}
	}()
	return st.update(k, vs, s, exists)
}

// newKeys gathers the new keys of tasks in st.news, each once, with the
// place it first appears in the batch, sets the value of each task's new
// key to its position in st.news, and returns those positions in the order
// the keys first appear.
func (st *keyState[K, V, S]) newKeys(tasks []*stateTask[K, V]) []int32 {
	g := st.news
	g.empty()
	for _, t := range tasks {
		for j := range t.news.pairs {
			kv, at := &t.news.pairs[j], t.news.first[j]
			id, added := g.keyPosHashed(kv.Key, t.news.hashes[j], at)
			if !added && at.before(g.first[id]) {
				g.first[id] = at
			}
			kv.Value = id
		}
	}
	order := make([]int32, len(g.pairs))
	for i := range order {
		order[i] = int32(i)
	}
	if len(tasks) > 1 {
		slices.SortFunc(order, func(a, b int32) int { return cmpFirst(g.first[a], g.first[b]) })
	}
	return order
}

// cmpFirst orders two places in a batch.
func cmpFirst(a, b firstAt) int {
	switch {
	case a.before(b):
		return -1
	case b.before(a):
		return 1
	}
	return 0
}

// place returns the values of the batch by key, in batch order: values(i)
// are those of the key of id i, a position in held, or len(held) + a
// position in st.news. values is called once per id, at most.
//
// When the runs of records of each task are together in the batch (one
// run per task, as a block of one range per shard has) and every task
// sorted its values (byKey), a key's values are its values in each task, copied task
// after task in the order of their runs, when values asks for them: update
// then reads them at once, from the cache. Otherwise they are placed
// record by record, in batch order, first.
func (st *keyState[K, V, S]) place(tasks []*stateTask[K, V], news []int32) (values func(id int) []V) {
	held := int32(len(st.held.pairs))
	var runs []stateRun
	n := 0
	for _, t := range tasks {
		runs = append(runs, t.runs...)
		n += len(t.ids)
	}
	var vals []V
	if st.reuse {
		st.vals = resize(st.vals, n)
		vals = st.vals
	} else {
		vals = make([]V, n)
	}
	slices.SortFunc(runs, func(a, b stateRun) int { return cmp.Compare(a.pos, b.pos) })
	sorted := !slices.ContainsFunc(tasks, func(t *stateTask[K, V]) bool { return !t.byKey })
	if order, together := tasksInOrder(runs, len(tasks)); together && sorted {
		// t.inv[i] is the number, in task t, of the key of id held + i
		// (see sortByKey), or -1.
		for _, t := range tasks {
			t.inv = resize(t.inv, len(news))
			for i := range t.inv {
				t.inv[i] = -1
			}
			for j := range t.news.pairs {
				t.inv[t.news.pairs[j].Value] = held + int32(j)
			}
		}
		next := 0
		return func(id int) []V {
			start := next
			for _, task := range order {
				t, x := tasks[task], int32(id)
				if x >= held {
					if x = t.inv[x-held]; x < 0 {
						continue
					}
				}
				next += copy(vals[next:], t.sorted[t.off[x]:t.off[x+1]])
			}
			if start == next {
				return nil
			}
			return vals[start:next:next]
		}
	}
	// Count the values of each key, then turn the counts into where each
	// key's next value goes.
	ends := make([]int32, int(held)+len(news))
	id := func(t *stateTask[K, V], j int32) int32 {
		if i := t.ids[j]; i >= 0 {
			return i
		}
		return held + t.news.pairs[^t.ids[j]].Value
	}
	for _, t := range tasks {
		for j := range int32(len(t.ids)) {
			ends[id(t, j)]++
		}
	}
	next := int32(0)
	for i, c := range ends {
		ends[i] = next
		next += c
	}
	inBatchOrder(runs, len(tasks), func(task int, from, to int32) {
		t := tasks[task]
		for j := from; j < to; j++ {
			i := id(t, j)
			vals[ends[i]] = t.vals[j]
			ends[i]++
		}
	})
	return func(id int) []V {
		start := int32(0)
		if id > 0 {
			start = ends[id-1]
		}
		if start == ends[id] {
			return nil
		}
		return vals[start:ends[id]:ends[id]]
	}
}

// tasksInOrder returns the tasks of runs, sorted by position, in the order
// of their first run, and whether each task's runs are together, with no
// other task's between them.
func tasksInOrder(runs []stateRun, tasks int) (order []int32, together bool) {
	seen := make([]bool, tasks)
	together = true
	for k, rn := range runs {
		if k > 0 && runs[k-1].task == rn.task {
			continue
		}
		if seen[rn.task] {
			together = false
		}
		seen[rn.task] = true
		order = append(order, rn.task)
	}
	return order, together
}

// mayHoldPointers reports whether a value of type t may hold a pointer.
func mayHoldPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && mayHoldPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if mayHoldPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}
