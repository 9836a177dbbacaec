package stream

import (
	"context"
	"hash/maphash"
	"math"
	"sync/atomic"

	"github.com/weirstream/weir/batch"
)

// The in-process shuffle of the keyed operators (ReduceByKey,
// CountByValue, and the per-batch step of ReduceByKeyAndWindow). For a
// batch of n input partitions:
//
//  1. Map side: one task per input partition runs the partition's fused
//     chain and combines its records by key, in the order keys first
//     appear, in an index that hashes each record's key once (keyIndex);
//     the hash also puts the key in one of P buckets (P =
//     Config.Parallelism), and the task lists the keys of each bucket.
//  2. Reduce side: one task per bucket (or, when the later map tasks hold
//     few keys, the last map task to finish, bucket after bucket: see
//     maxInlineReduce) folds the keys of bucket p of every map task, map
//     task by map task, so the values of a key are combined
//     in partition order. Nothing is copied: a key's value is combined in
//     place in the entry of the map task where the key appears first in
//     the batch, and its entries in other map tasks are marked dead. The
//     first map task's index finds a key, with the hash its map task
//     computed; the keys it lacks go in an index of the bucket's own only
//     when a third map task may look them up.
//  3. Each map task's live entries are already in the order their keys
//     first appear in the batch, so one merge of the n lists gives the
//     output. Its order, that of first appearance in the batch as
//     ForEachBatch sees it, depends on the batch's records alone, not on P
//     nor on the hash seed, so a batch recomputed after a restart gives the
//     same output.
//
// The map tasks' indexes and slices are kept from batch to batch, so a
// steady stream allocates little more than its output.
//
// With one input partition, the map side's result is the output as it is.

// firstAt is where a key first appears in a batch: the position of its
// chunk (see chunk), and its index among the records of that position.
type firstAt struct {
	pos, off int32
}

func (a firstAt) before(b firstAt) bool {
	return a.pos < b.pos || (a.pos == b.pos && a.off < b.off)
}

// next moves a to the chunk at pos, the next of a partition: the count of
// records restarts at a new position.
func (a *firstAt) next(pos int) {
	if int32(pos) != a.pos {
		a.pos, a.off = int32(pos), 0
	}
}

// combined is the pairs of a map task, one per key, in the order keys first
// appear in its partition, and what the shuffle notes about them.
type combined[K comparable, V any] struct {
	seed   maphash.Seed
	index  keyIndex
	pairs  []Pair[K, V]
	hashes []uint64  // hashes[i] is the hash of pairs[i]'s key, by seed
	first  []firstAt // first[i] is where pairs[i]'s key first appears

	// order lists the indexes of pairs by bucket: bucket p's are
	// order[start[p]:start[p+1]]. bk[i] is the bucket of pairs[i].
	order, start, bk []int32
	// dead[i] is set when the value of pairs[i]'s key is combined in
	// another map task's entry, which is the one in the output.
	dead []bool
	// at[i], for the first map task only, is the entry in which the value
	// of pairs[i]'s key is combined: pairs[i] unless a later map task has
	// the key earlier in the batch.
	at []entry
}

// entry is pairs[idx] of map task task.
type entry struct {
	task, idx int32
}

// find returns the position in c.pairs of key k, of hash h, or -1 and the
// slot of c.index where to add it.
func (c *combined[K, V]) find(k K, h uint64) (pos int32, slot int) {
	slots := c.index.slots
	mask := uint64(len(slots) - 1)
	tag := uint32(h >> 32)
	for i := h & mask; ; i = (i + 1) & mask {
		s := slots[i]
		if s.pos == 0 {
			return -1, int(i)
		}
		if s.tag == tag && c.pairs[s.pos-1].Key == k {
			return s.pos - 1, int(i)
		}
	}
}

// keyPos returns the position in c.pairs of key k, adding the key, with the
// zero value, first seen at at, if c lacks it; added says it did.
// The lookup is written out here, not shared with keyPosHashed, so that
// a record's key costs one call.
func (c *combined[K, V]) keyPos(k K, at firstAt) (pos int32, added bool) {
	h := maphash.Comparable(c.seed, k)
	pos, slot := c.find(k, h)
	if pos >= 0 {
		return pos, false
	}
	return c.insert(k, h, slot, at), true
}

// keyPosHashed is keyPos for a key whose hash, by c.seed, is h.
func (c *combined[K, V]) keyPosHashed(k K, h uint64, at firstAt) (pos int32, added bool) {
	pos, slot := c.find(k, h)
	if pos >= 0 {
		return pos, false
	}
	return c.insert(k, h, slot, at), true
}

// insert adds key k, of hash h, with the zero value, first seen at at, in
// slot, as find returned it, and returns its position in c.pairs.
func (c *combined[K, V]) insert(k K, h uint64, slot int, at firstAt) int32 {
	pos := int32(len(c.pairs))
	c.pairs = append(c.pairs, Pair[K, V]{Key: k})
	c.hashes = append(c.hashes, h)
	c.first = append(c.first, at)
	c.index.add(h, pos, slot, c.hashes)
	return pos
}

// empty removes c's keys, keeping its room: its index is sized for as
// many keys as it held.
func (c *combined[K, V]) empty() {
	c.index.reset(len(c.pairs))
	c.pairs, c.hashes, c.first = c.pairs[:0], c.hashes[:0], c.first[:0]
}

// retain keeps the keys of c for which keep(i) is true, i their position
// (keep(i) is called before position i is written), in order, and indexes
// them anew if any was dropped.
func (c *combined[K, V]) retain(keep func(i int) bool) {
	n := 0
	for i := range c.pairs {
		if keep(i) {
			c.pairs[n], c.hashes[n], c.first[n] = c.pairs[i], c.hashes[i], c.first[i]
			n++
		}
	}
	if n == len(c.pairs) {
		return
	}
	clear(c.pairs[n:]) // let go of the keys and values
	c.pairs, c.hashes, c.first = c.pairs[:n], c.hashes[:n], c.first[:n]
	c.index.fill(c.hashes)
}

// bucket returns the indexes of c's pairs in bucket p.
func (c *combined[K, V]) bucket(p int) []int32 { return c.order[c.start[p]:c.start[p+1]] }

// sortBuckets fills c's order and start for par buckets, and empties dead.
func (c *combined[K, V]) sortBuckets(par int) {
	n := len(c.pairs)
	c.order, c.start, c.dead = resize(c.order, n), resize(c.start, par+2), resize(c.dead, n)
	clear(c.start)
	clear(c.dead)
	if par == 1 {
		for j := range c.order {
			c.order[j] = int32(j)
		}
		c.start[1] = int32(n)
		return
	}
	// A counting sort by bucket. start[b+2] counts bucket b, so that after
	// the sums start[b+1] is where bucket b starts, and moves to where it
	// ends as the indexes are placed.
	c.bk = resize(c.bk, n)
	for j, h := range c.hashes {
		b := bucketOf(h, par)
		c.bk[j] = b
		c.start[b+2]++
	}
	for p := 2; p <= par; p++ {
		c.start[p] += c.start[p-1]
	}
	for j, b := range c.bk {
		c.order[c.start[b+1]] = int32(j)
		c.start[b+1]++
	}
	c.start = c.start[:par+1]
}

// resize returns s with length n, reusing its array if it has the room.
// The elements are not cleared.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// keyed is a keyed operator: how a map task combines the records of one
// partition, and how values are reduced.
type keyed[T any, K comparable, V any] struct {
	seed   maphash.Seed
	reduce func(V, V) V
	// combine adds the records of partition part of in to c.
	combine func(c *combined[K, V], in *parted[T], part int)
	hint    int // most keys a task had in the previous batch, to size maps
	// tasks are the map tasks of the previous batch, emptied, used again:
	// making their indexes anew each batch costs about as much, in
	// allocation and garbage collection, as filling them. An index keeps
	// the room of the largest batch it held. Batches run one at a time,
	// and nothing keeps a task after its batch. The pairs of a task are
	// not kept when they were the output (one partition).
	tasks []*combined[K, V]
	// own are the reduce tasks' indexes of the keys the first map task
	// lacks, and where each such key's value is combined, used again as
	// tasks are.
	own  []map[K]int32
	owns [][]entry
	// reduceApart, for tests, makes every shuffle start a stage of reduce
	// tasks, however small its reduce side (see maxInlineReduce).
	reduceApart bool
	// dead is the operator's Quarantine, if it has one.
	dead *keyedDead
}

// task returns an empty combined for map task i, made from that of the
// previous batch.
func (kd *keyed[T, K, V]) task(i int) *combined[K, V] {
	for len(kd.tasks) <= i {
		kd.tasks = append(kd.tasks, &combined[K, V]{})
	}
	c := kd.tasks[i]
	c.seed = kd.seed
	c.index.reset(kd.hint)
	if c.pairs == nil {
		c.pairs = make([]Pair[K, V], 0, kd.hint)
	}
	c.hashes, c.first = resize(c.hashes, 0), resize(c.first, 0)
	return c
}

// keep readies the first n tasks for the next batch: out says their pairs
// are the output, which the next batch must not overwrite.
func (kd *keyed[T, K, V]) keep(n int, out bool) {
	kd.hint = 0
	for _, c := range kd.tasks[:n] {
		kd.hint = max(kd.hint, len(c.pairs))
		if out {
			c.pairs = nil
			continue
		}
		clear(c.pairs) // let go of the keys and values
		c.pairs = c.pairs[:0]
	}
}

// plan returns the stream's plan: the shuffle of the batch of s.
func (kd *keyed[T, K, V]) plan(s *Stream[T]) func(r *run) (*parted[Pair[K, V]], error) {
	return func(r *run) (*parted[Pair[K, V]], error) {
		in, out, letters, err := mapSide(r, kd.dead, s, func(in *parted[T], par int) ([]Pair[K, V], error) {
			return kd.shuffle(r.ctx, par, in)
		})
		if err == nil {
			err = kd.dead.quarantine(r, letters)
		}
		if err != nil || in == nil {
			return nil, err
		}
		return split(batch.New(in.time, in.blocks, out), r.par), nil
	}
}

// shuffle combines the records of in by key, par tasks at a time, and
// returns one pair per key, in the order keys first appear.
func (kd *keyed[T, K, V]) shuffle(ctx context.Context, par int, in *parted[T]) ([]Pair[K, V], error) {
	n := len(in.keys)
	if n == 0 {
		return nil, nil
	}
	tasks := make([]*combined[K, V], n)
	for i := range tasks {
		tasks[i] = kd.task(i)
	}
	if n == 1 {
		err := parallel(ctx, 1, 1, func(context.Context, int) error {
			return in.mapTaskError(0, safely(func() error { kd.combine(tasks[0], in, 0); return nil }))
		})
		out := tasks[0].pairs
		kd.keep(n, true)
		return out, err
	}
	defer kd.keep(n, false) // the output is merge's copy
	for len(kd.own) < par {
		kd.own, kd.owns = append(kd.own, nil), append(kd.owns, nil)
	}
	keys := make([]int, par)
	// Map side: each task combines its partition and sorts its keys by
	// bucket. The last to finish reduces every bucket itself when the
	// reduce side is small (see inlineReduce).
	var mapped atomic.Int32
	reduced := false
	err := parallel(ctx, par, n, func(_ context.Context, i int) error {
		c := tasks[i]
		if err := in.mapTaskError(i, safely(func() error { kd.combine(c, in, i); return nil })); err != nil {
			return err
		}
		c.sortBuckets(par)
		if i == 0 {
			c.at = resize(c.at, len(c.pairs))
			for j := range c.at {
				c.at[j] = entry{0, int32(j)}
			}
		}
		if int(mapped.Add(1)) == n && !kd.reduceApart && inlineReduce(tasks) {
			for p := range par {
				keys[p] = kd.reduceBucket(tasks, p)
			}
			reduced = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !reduced {
		// Reduce side: task p combines the keys of bucket p. Every entry
		// it writes (a value, dead, at, or its own index) is of a key of
		// bucket p, which no other task touches.
		err = parallel(ctx, par, par, func(_ context.Context, p int) error {
			keys[p] = kd.reduceBucket(tasks, p)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	total := 0
	for _, k := range keys {
		total += k
	}
	return merge(tasks, total), nil
}

// maxInlineReduce is the most keys the map tasks after the first may hold
// for the last map task to reduce every bucket itself rather than start a
// stage of reduce tasks: at about 25 ns a key, at most 0.4 ms, against
// the 0.1 ms (median) to 1 ms (90th percentile) that starting a stage and
// waiting for it costs on a virtual machine whose idle CPUs must be woken
// (BenchmarkParallelStart).
const maxInlineReduce = 1 << 14

// inlineReduce reports whether the reduce side of tasks is small enough
// for one goroutine: see maxInlineReduce.
func inlineReduce[K comparable, V any](tasks []*combined[K, V]) bool {
	n := 0
	for _, c := range tasks[1:] {
		n += len(c.pairs)
	}
	return n <= maxInlineReduce
}

// reduceBucket combines the keys of bucket p of every map task, each into
// the entry where the key first appears in the batch, and returns the
// number of keys in the bucket.
func (kd *keyed[T, K, V]) reduceBucket(tasks []*combined[K, V], p int) int {
	base := tasks[0]
	keys := len(base.bucket(p))
	// The keys the first task lacks need an index only if a third task
	// may look them up.
	own, owns := kd.own[p], kd.owns[p][:0]
	if own == nil && len(tasks) > 2 {
		own = make(map[K]int32)
		kd.own[p] = own
	}
	clear(own) // in case a panic of reduce left the last batch's
	for i := 1; i < len(tasks); i++ {
		c := tasks[i]
		for _, j := range c.bucket(p) {
			kv := &c.pairs[j]
			var at *entry
			if b, _ := base.find(kv.Key, c.hashes[j]); b >= 0 {
				at = &base.at[b]
			} else if o, ok := own[kv.Key]; ok {
				at = &owns[o]
			} else {
				// The key's first entry: the output's, so far.
				keys++
				if i+1 < len(tasks) {
					own[kv.Key] = int32(len(owns))
					owns = append(owns, entry{int32(i), j})
				}
				continue
			}
			// Values combine in task order; the key's entry in the output
			// is the one that comes first in the batch.
			prev := tasks[at.task]
			v := kd.reduce(prev.pairs[at.idx].Value, kv.Value)
			if c.first[j].before(prev.first[at.idx]) {
				kv.Value = v
				prev.dead[at.idx] = true
				*at = entry{int32(i), j}
			} else {
				prev.pairs[at.idx].Value = v
				c.dead[j] = true
			}
		}
	}
	clear(own) // let go of the keys
	clear(owns)
	kd.owns[p] = owns[:0]
	return keys
}

// merge returns the live pairs of tasks, total of them, in the order their
// keys first appear in the batch: each task's are in that order, so it
// merges the tasks' lists, with a binary heap of the lists' heads. It
// takes from the list at the top of the heap for as long as it comes
// before the other lists' heads, so two lists merge without heap work.
func merge[K comparable, V any](tasks []*combined[K, V], total int) []Pair[K, V] {
	next := make([]int, len(tasks)) // next[i] is task i's next entry
	var heap []int                  // tasks with entries left, a min-heap by head
	for i, c := range tasks {
		if len(c.pairs) > 0 {
			heap = append(heap, i)
		}
	}
	head := func(h int) firstAt { i := heap[h]; return tasks[i].first[next[i]] }
	down := func(h int) {
		for {
			m := h
			if l := 2*h + 1; l < len(heap) && head(l).before(head(m)) {
				m = l
			}
			if r := 2*h + 2; r < len(heap) && head(r).before(head(m)) {
				m = r
			}
			if m == h {
				return
			}
			heap[h], heap[m] = heap[m], heap[h]
			h = m
		}
	}
	for h := len(heap)/2 - 1; h >= 0; h-- {
		down(h)
	}
	out := make([]Pair[K, V], 0, total)
	for len(heap) > 0 {
		// The other lists' first head is one of the top's children.
		end := firstAt{pos: math.MaxInt32, off: math.MaxInt32}
		for _, h := range []int{1, 2} {
			if h < len(heap) && head(h).before(end) {
				end = head(h)
			}
		}
		i := heap[0]
		c, j := tasks[i], next[i]
		for ; j < len(c.pairs) && c.first[j].before(end); j++ {
			if !c.dead[j] {
				out = append(out, c.pairs[j])
			}
		}
		if next[i] = j; j == len(c.pairs) {
			heap[0] = heap[len(heap)-1]
			heap = heap[:len(heap)-1]
		}
		down(0)
	}
	return out
}
