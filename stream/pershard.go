package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/hashkey"
	"github.com/weirstream/weir/source"
)

// State per shard (DESIGN.md, "State per shard"): a keyed stateful
// operator (UpdateStateByKey, MapWithState) whose records come from one
// source sharing its shards with other workers, and whose keys are placed
// by shard (PartitionedBy on the way from the source, or MapWithState keyed
// by the shard's ID with PartitionedByKey), keeps the state of the keys of
// the shards its worker reads, and nothing else. The source's receiver is
// given the operators' side (source.Runtime.ShardState, a *shardStates):
// it loads a shard's state before it reads the shard, snapshots it to a
// store every worker reads, checkpoints no further than its last snapshot,
// and drops it when the shard goes; the last snapshot of a shard it stops
// reading for good (source.ShardStateHandOver) drops it in the same step,
// so that no batch after that snapshot times out or updates the shard's
// keys a second time. A record of a shard not loaded (one stored before its
// lease was lost) leaves the state as it is: the shard's next owner counts
// it.

// PartitionedBy declares that every record of s whose key is k was read
// from the Kinesis shard whose hash key range holds the MD5 digest of
// partitionKey(k), as Kinesis places a record by its partition key: the
// case of a stream repartition.ByKey wrote, which declares it itself, or
// of a source whose producers use a function of the key as partition key.
// It returns s.
//
// A stateful operator keyed by K (UpdateStateByKey, MapWithState,
// ReduceByKeyAndWindow, a Window of the pairs) on s, or
// on a stream made from s by operators that keep the key (Filter, a Map of
// the values, PartitionedBy's own result), then keeps its state per shard
// when its source shares its shards with other workers (a Kinesis receiver
// with Config.Leases): the state of a shard's keys moves with the shard's
// lease to the worker that reads it next, and a shard split or merged
// passes its keys' state on to its children. Without a source sharing its
// shards, the declaration changes nothing.
//
// State per shard replaces Config.Recovery for those operators: Run
// refuses a pipeline with both.
func PartitionedBy[K comparable, V any](s *Stream[Pair[K, V]], partitionKey func(K) string) *Stream[Pair[K, V]] {
	mustExist("PartitionedBy", "s", s)
	requireFunc(s.p, "PartitionedBy", s.n, "partitionKey", partitionKey == nil)
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.n.partitionKey = partitionKey
	s.n.partitionKeyAny = func(k any) string { return partitionKey(k.(K)) }
	s.n.partitioned = true
	return s
}

// partitionedBy returns the node of the nearest PartitionedBy on n or its
// single-parent ancestors, or nil.
func partitionedBy(n *node) *node {
	for m := n; m != nil; m = m.parents[0] {
		if m.partitionKey != nil {
			return m
		}
		if len(m.parents) != 1 {
			return nil
		}
	}
	return nil
}

// partitionKeyOf returns the partition key function a PartitionedBy
// declared for keys of type K on n or its single-parent ancestors, or nil.
func partitionKeyOf[K comparable](n *node) func(K) string {
	if m := partitionedBy(n); m != nil {
		fn, _ := m.partitionKey.(func(K) string)
		return fn
	}
	return nil
}

// shardRange is a shard as the state places keys: its ID and hash key
// range.
type shardRange struct {
	id string
	r  hashkey.Range
}

// shardKeyed is implemented by the states that can be kept per shard.
type shardKeyed interface {
	// byShard makes the state of node n kept per shard, if its keys can
	// be placed by shard, and returns its view; otherwise it returns nil
	// and the state is kept as before.
	byShard(n *node) shardView
}

// shardView is a state kept per shard. Its methods are called from the
// batch loop only, between batches.
type shardView interface {
	encodeShard(sh shardRange) ([]byte, error)
	loadShard(sh shardRange, data [][]byte) error
	dropShard(sh shardRange)
}

// shardKeys places the keys of a state kept per shard and knows which
// shards are loaded.
type shardKeys[K comparable] struct {
	pk     func(K) string // nil: the key is the shard's ID
	loaded map[string]hashkey.Range
	// known holds, with pk nil, the IDs of every shard ever loaded: a key
	// among them that is not loaded is a shard no longer read; a key
	// among none is no shard's ID (a user key of a MapWithState declared
	// PartitionedByKey), kept per worker.
	known map[string]bool
}

// newShardKeys returns the placement of n's keys of type K, or nil if
// they cannot be placed.
func newShardKeys[K comparable](n *node) *shardKeys[K] {
	pk := partitionKeyOf[K](n.parents[0])
	if pk == nil {
		var k K
		if _, ok := any(k).(string); !ok || !n.keyedByShard {
			return nil
		}
	}
	return &shardKeys[K]{pk: pk, loaded: make(map[string]hashkey.Range), known: make(map[string]bool)}
}

// in reports whether k is a key of shard sh.
func (x *shardKeys[K]) in(k K, sh shardRange) bool {
	if x.pk == nil {
		id, _ := any(k).(string)
		return id == sh.id
	}
	return sh.r.Contains(hashkey.Of(x.pk(k)))
}

// owns reports whether k is a key of a loaded shard. A nil x owns every
// key. Kept by shard ID, x also owns a key that is the ID of no shard
// ever loaded: the source loads a shard before it pushes its records, so
// such a key is no shard's ID but a user's key (each read from one shard,
// as PartitionedByKey declares), whose state stays with this worker, as
// without state per shard, rather than never being given any.
func (x *shardKeys[K]) owns(k K) bool {
	if x == nil {
		return true
	}
	if x.pk == nil {
		id, _ := any(k).(string)
		_, ok := x.loaded[id]
		return ok || !x.known[id]
	}
	h := hashkey.Of(x.pk(k))
	for _, r := range x.loaded {
		if r.Contains(h) {
			return true
		}
	}
	return false
}

// keyedState is what a keyed state gives shardView: its keys, in order,
// an encoding of some of them, and the merge and removal of keys.
type keyedState[K comparable] interface {
	keyList() []K
	encodeKeys(keys []K) ([]byte, error)
	// mergeKeys adds the keys of data for which keep is true, with their
	// states, after the others (a key it has already is replaced).
	mergeKeys(data []byte, keep func(K) bool) error
	// mergeAs adds the states of data's keys, whatever they are, as the
	// state of key: merged into its state (mergeValue) if it has one.
	mergeAs(data []byte, key K) error
	removeKeys(drop func(K) bool)
}

// mergeKeyed adds to a keyed state (keys in order, vals by key) the
// decoded keys for which keep is true, with their values: a new key after
// the others, a key it has already replaced. It returns the keys.
func mergeKeyed[K comparable, E any](keys []K, vals map[K]E, decoded []K, values []E, keep func(K) bool) []K {
	for i, k := range decoded {
		if !keep(k) {
			continue
		}
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
		vals[k] = values[i]
	}
	return keys
}

// merger is a state that takes in another's: sink/kinesis's Deduplicate
// filter (origin.Filter), so that a merged shard's child drops the copies
// either parent would have.
type merger[S any] interface{ MergeFrom(S) }

// mergeValue merges src into dst if dst is a merger, and returns dst: a
// state that cannot merge keeps the first parent's.
func mergeValue[S any](dst, src S) S {
	if m, ok := any(dst).(merger[S]); ok {
		m.MergeFrom(src)
	}
	return dst
}

// mergeAsKeyed adds values to a keyed state as the value of key to,
// merged by merge into the one it has, and returns the keys.
func mergeAsKeyed[K comparable, E any](keys []K, vals map[K]E, values []E, to K, merge func(dst, src E) E) []K {
	for _, e := range values {
		if old, ok := vals[to]; ok {
			vals[to] = merge(old, e)
			continue
		}
		vals[to] = e
		keys = append(keys, to)
	}
	return keys
}

// removeKeyed removes from a keyed state the keys for which drop is
// true, and returns the keys left, in order.
func removeKeyed[K comparable, E any](keys []K, vals map[K]E, drop func(K) bool) []K {
	kept := keys[:0]
	for _, k := range keys {
		if drop(k) {
			delete(vals, k)
		} else {
			kept = append(kept, k)
		}
	}
	clear(keys[len(kept):])
	return kept
}

// keyedView is the shardView of a keyed state.
type keyedView[K comparable] struct {
	x  *shardKeys[K]
	st keyedState[K]
}

func (v keyedView[K]) encodeShard(sh shardRange) ([]byte, error) {
	var keys []K
	for _, k := range v.st.keyList() {
		if v.x.in(k, sh) {
			keys = append(keys, k)
		}
	}
	return v.st.encodeKeys(keys)
}

func (v keyedView[K]) loadShard(sh shardRange, data [][]byte) error {
	in := func(k K) bool { return v.x.in(k, sh) }
	v.st.removeKeys(in)
	for _, d := range data {
		var err error
		if v.x.pk == nil {
			// Keyed by shard ID: a parent's state (a reshard) becomes the
			// child's, merged if the child has two parents.
			id, _ := any(sh.id).(K)
			err = v.st.mergeAs(d, id)
		} else {
			err = v.st.mergeKeys(d, in)
		}
		if err != nil {
			return err
		}
	}
	v.x.loaded[sh.id] = sh.r
	v.x.known[sh.id] = true
	return nil
}

func (v keyedView[K]) dropShard(sh shardRange) {
	v.st.removeKeys(func(k K) bool { return v.x.in(k, sh) })
	delete(v.x.loaded, sh.id)
}

// shardStates is the source.ShardState of one source: the operators
// keeping state per shard of its records.
type shardStates struct {
	e     *engine
	src   int
	nodes []*node
	views []shardView
	shape string
	// done holds, by loaded shard, the greatest sequence number of its
	// records in a batch completed since it was loaded; used by the batch
	// loop only.
	done map[string]string
}

var (
	_ source.ShardState         = (*shardStates)(nil)
	_ source.ShardStateHandOver = (*shardStates)(nil)
)

// planShards returns, by source index, the operators of the graph that
// keep state per shard of the source's records (nil for a source with
// none), making their states kept per shard. p.mu is held.
func (p *Pipeline) planShards() map[int][]*node {
	shared := make(map[*node]int)
	for i, s := range p.sources {
		if sh, ok := s.receiver().(source.ShardSharer); ok && sh.SharesShards() {
			shared[s.graphNode()] = i
		}
	}
	if len(shared) == 0 {
		return nil
	}
	plan := make(map[int][]*node)
	for _, n := range p.nodes {
		sk, ok := n.state.(shardKeyed)
		if !ok || len(n.parents) != 1 {
			continue
		}
		srcs := sourcesOf(n)
		if len(srcs) != 1 {
			continue
		}
		i, ok := shared[srcs[0]]
		if !ok {
			continue
		}
		if v := sk.byShard(n); v != nil {
			n.shardView = v
			plan[i] = append(plan[i], n)
		}
	}
	return plan
}

// sourcesOf returns the source nodes n's records come from.
func sourcesOf(n *node) []*node {
	var srcs []*node
	seen := make(map[*node]bool)
	var walk func(m *node)
	walk = func(m *node) {
		if seen[m] {
			return
		}
		seen[m] = true
		if len(m.parents) == 0 {
			srcs = append(srcs, m)
		}
		for _, parent := range m.parents {
			walk(parent)
		}
	}
	walk(n)
	return srcs
}

// shardProblemsLocked returns a problem for each operator kept per shard
// when the pipeline has a recovery log. p.mu is held.
func (p *Pipeline) shardProblemsLocked() []error {
	if p.cfg.Recovery == nil {
		return nil
	}
	var problems []error
	for _, nodes := range p.planShards() {
		for _, n := range nodes {
			problems = append(problems, fmt.Errorf("%v keeps its state per shard of a source whose shards other workers share "+
				"(its keys are partitioned by shard: stream.PartitionedBy, repartition.ByKey): the state moves with each shard's lease "+
				"through the lease table's state store, which replaces Config.Recovery for it; remove Config.Recovery", n))
		}
	}
	return problems
}

// newShardStates returns the ShardState of source src for nodes.
func newShardStates(e *engine, src int, nodes []*node) *shardStates {
	s := &shardStates{e: e, src: src, nodes: nodes, done: make(map[string]string)}
	h := sha256.New()
	for _, n := range nodes {
		s.views = append(s.views, n.shardView)
		fmt.Fprintf(h, "%s %T\n", n.op, n.state)
	}
	s.shape = "pershard-v1-" + hex.EncodeToString(h.Sum(nil)[:12])
	return s
}

// Shape implements source.ShardState.
func (s *shardStates) Shape() string { return s.shape }

// parseShard returns the placement of shard sh.
func parseShard(sh source.Shard) (shardRange, error) {
	r, ok := hashkey.ParseRange(sh.StartingHashKey, sh.EndingHashKey)
	if !ok {
		return shardRange{}, fmt.Errorf("stream: shard %s of stream %s: hash key range [%q, %q] is not a range of decimal hash keys",
			sh.ID, sh.Stream, sh.StartingHashKey, sh.EndingHashKey)
	}
	return shardRange{id: sh.ID, r: r}, nil
}

// Snapshot implements source.ShardState: the operators' encodings of the
// shard's keys, in graph order.
func (s *shardStates) Snapshot(ctx context.Context, sh source.Shard) (data []byte, upTo string, err error) {
	return s.snapshot(ctx, sh, false)
}

// SnapshotAndDrop implements source.ShardStateHandOver: Snapshot, then
// Drop, in one step between batches, so that no batch after the snapshot
// times out or updates the shard's keys (the next owner, loading the
// snapshot, does).
func (s *shardStates) SnapshotAndDrop(ctx context.Context, sh source.Shard) (data []byte, upTo string, err error) {
	return s.snapshot(ctx, sh, true)
}

// snapshot returns the encoded state of shard sh and its position, and,
// with drop, drops it if it returns no error.
func (s *shardStates) snapshot(ctx context.Context, sh source.Shard, drop bool) (data []byte, upTo string, err error) {
	r, err := parseShard(sh)
	if err != nil {
		return nil, "", err
	}
	err = s.e.between(ctx, func() error {
		if s.e.unfinished {
			// Its position would be before records the state holds: the
			// shard's next owner, reading after it, would count them twice.
			return errors.New("a batch did not complete after its stateful operators ran, so the state holds records of no completed batch; " +
				"the shard's next owner starts from its last snapshot")
		}
		var w snapWriter
		w.uint(uint64(len(s.views)))
		for _, v := range s.views {
			d, err := v.encodeShard(r)
			if err != nil {
				return err
			}
			w.bytes(d)
		}
		data, upTo = w.buf, s.done[sh.ID]
		if drop {
			s.drop(r)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("stream: snapshot the state of shard %s: %w", sh.ID, err)
	}
	return data, upTo, nil
}

// Load implements source.ShardState.
func (s *shardStates) Load(ctx context.Context, sh source.Shard, data ...[]byte) error {
	r, err := parseShard(sh)
	if err != nil {
		return err
	}
	parts := make([][][]byte, len(s.views)) // by view, the parts of each data
	for _, d := range data {
		rd := &snapReader{buf: d}
		n := rd.count()
		if rd.err == nil && n != len(s.views) {
			return fmt.Errorf("stream: the state of shard %s holds %d operators' states, this pipeline keeps %d per shard", sh.ID, n, len(s.views))
		}
		for i := range n {
			parts[i] = append(parts[i], rd.bytes())
		}
		if err := rd.done(); err != nil {
			return fmt.Errorf("stream: the state of shard %s: %w", sh.ID, err)
		}
	}
	err = s.e.between(ctx, func() error {
		for i, v := range s.views {
			if err := v.loadShard(r, parts[i]); err != nil {
				return fmt.Errorf("%v: %w", s.nodes[i], err)
			}
		}
		s.done[sh.ID] = ""
		return nil
	})
	if err != nil {
		return fmt.Errorf("stream: load the state of shard %s: %w", sh.ID, err)
	}
	return nil
}

// Drop implements source.ShardState.
func (s *shardStates) Drop(ctx context.Context, sh source.Shard) error {
	r, err := parseShard(sh)
	if err != nil {
		return err
	}
	return s.e.between(ctx, func() error {
		s.drop(r)
		return nil
	})
}

// drop forgets the state of shard r; called between batches.
func (s *shardStates) drop(r shardRange) {
	for _, v := range s.views {
		v.dropShard(r)
	}
	delete(s.done, r.id)
}

// completed notes the blocks of a completed batch; called by the batch
// loop.
func (s *shardStates) completed(blocks []batch.BlockInfo) {
	for _, b := range blocks {
		for _, rg := range b.Ranges {
			if last, ok := s.done[rg.Shard]; ok && rg.Last != "" {
				s.done[rg.Shard] = batch.MaxSeq(last, rg.Last)
			}
		}
	}
}

// between runs f on the batch loop between two batches, or at once if the
// loop has ended, and returns its error. f calls user functions (a
// partition key function, codecs): a panic in it is returned as an error.
func (e *engine) between(ctx context.Context, f func() error) error {
	var err error
	done := make(chan struct{})
	call := func() { err = safely(f); close(done) }
	select {
	case e.betweenc <- call:
		<-done
		return err
	case <-e.loopDone:
		e.afterLoop.Lock()
		defer e.afterLoop.Unlock()
		return safely(f)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// filterBatch returns b with only the records keep is true for, part by
// part.
func filterBatch[T any](b *batch.Batch[T], keep func(T) bool) *batch.Batch[T] {
	parts := make([][]T, len(b.Parts()))
	for i, p := range b.Parts() {
		for _, r := range p {
			if keep(r) {
				parts[i] = append(parts[i], r)
			}
		}
	}
	return batch.Derive(b, parts...)
}

// historyView is the shardView of a window's history of batches: hashOf
// places a record (the hash key of its partition key), loaded holds the
// shards loaded, and changed is called when the history changed between
// batches (a windowed reduce then computes its next window from the
// history).
type historyView[T any] struct {
	h       *history[T]
	rc      recordCodec[T]
	hashOf  func(T) hashkey.Key
	loaded  map[string]hashkey.Range
	changed func()
}

// newHistoryView keeps h per shard, placing records by hashOf and keeping
// the records of loaded shards only.
func newHistoryView[T any](h *history[T], rc recordCodec[T], hashOf func(T) hashkey.Key, changed func()) historyView[T] {
	v := historyView[T]{h: h, rc: rc, hashOf: hashOf, loaded: make(map[string]hashkey.Range), changed: changed}
	h.keep = func(rec T) bool {
		k := hashOf(rec)
		for _, r := range v.loaded {
			if r.Contains(k) {
				return true
			}
		}
		return false
	}
	return v
}

// of returns the filter of the records in (or, with in false, out of)
// shard sh.
func (v historyView[T]) of(sh shardRange, in bool) func(T) bool {
	return func(rec T) bool { return sh.r.Contains(v.hashOf(rec)) == in }
}

// without removes from the kept batches the records of shard sh.
func (v historyView[T]) without(sh shardRange) {
	for i, b := range v.h.bs {
		v.h.bs[i] = filterBatch(b, v.of(sh, false))
	}
	if v.changed != nil {
		v.changed()
	}
}

func (v historyView[T]) encodeShard(sh shardRange) ([]byte, error) {
	kept := history[T]{bs: make([]*batch.Batch[T], len(v.h.bs))}
	for i, b := range v.h.bs {
		kept.bs[i] = batch.New(b.Time(), nil, filterBatch(b, v.of(sh, true)).Parts()...)
	}
	var w snapWriter
	if err := kept.encode(&w, v.rc); err != nil {
		return nil, err
	}
	return w.buf, nil
}

// loadShard replaces the records of shard sh in the kept batches with
// those of data, restricted to sh, each in the kept batch of its time (one
// made if none).
func (v historyView[T]) loadShard(sh shardRange, data [][]byte) error {
	v.without(sh)
	for _, d := range data {
		var loaded history[T]
		r := &snapReader{buf: d}
		if err := loaded.decode(r, v.rc); err != nil {
			return err
		}
		if err := r.done(); err != nil {
			return err
		}
		for _, b := range loaded.bs {
			v.h.merge(filterBatch(b, v.of(sh, true)))
		}
	}
	v.loaded[sh.id] = sh.r
	return nil
}

func (v historyView[T]) dropShard(sh shardRange) {
	v.without(sh)
	delete(v.loaded, sh.id)
}

// merge adds the records of b to the kept batch of b's time, or keeps b
// in time order if there is none.
func (h *history[T]) merge(b *batch.Batch[T]) {
	for i, k := range h.bs {
		switch {
		case k.Time() == b.Time():
			h.bs[i] = batch.New(k.Time(), k.Blocks(), append(slices.Clone(k.Parts()), b.Parts()...)...)
			return
		case k.Time() > b.Time():
			h.bs = slices.Insert(h.bs, i, b)
			return
		}
	}
	h.bs = append(h.bs, b)
}

// keyedRecord is a record that has a key (a Pair).
type keyedRecord interface{ anyKey() any }

// byShard implements shardKeyed: a window of pairs whose keys a
// PartitionedBy places.
func (s *windowState[T]) byShard(n *node) shardView {
	m := partitionedBy(n.parents[0])
	var zero T
	if _, ok := any(zero).(keyedRecord); !ok || m == nil {
		return nil
	}
	pk := m.partitionKeyAny
	return newHistoryView(s.h, s.rc, func(rec T) hashkey.Key { return hashkey.Of(pk(any(rec).(keyedRecord).anyKey())) }, nil)
}

// byShard implements shardKeyed: the per-batch reductions of keys a
// PartitionedBy places, and the window kept with an inverse, computed
// again from them when they change.
func (w *windowReduce[K, V]) byShard(n *node) shardView {
	pk := partitionKeyOf[K](n.parents[0])
	if pk == nil {
		return nil
	}
	return newHistoryView(&w.h, w.rc, func(p Pair[K, V]) hashkey.Key { return hashkey.Of(pk(p.Key)) }, func() { w.ok = false })
}
