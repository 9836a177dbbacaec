package stream

import (
	"context"
	"hash/maphash"
	"slices"

	"github.com/weirstream/weir/batch"
)

// The in-process shuffle of the keyed operators (ReduceByKey,
// CountByValue). For a batch of n input partitions:
//
//  1. Map side: one task per input partition runs the partition's fused
//     chain and combines its records by key, in the order keys first
//     appear, and puts each combined key in one of P buckets by a hash of
//     the key (P = Config.Parallelism).
//  2. Reduce side: one task per bucket combines the keys of bucket p of
//     every map task, map task by map task, so the values of a key are
//     combined in partition order, and sorts its pairs by where their keys
//     first appear in the batch. The pairs are not copied into buckets:
//     reduce task p folds the others into the first map task's pairs of
//     bucket p, which no other task touches.
//  3. The P sorted lists are merged into one. Its order, that of first
//     appearance in the batch as ForEachBatch sees it, depends on the
//     batch's records alone, not on P nor on the hash seed, so a batch
//     recomputed after a restart gives the same output.
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

func (a firstAt) compare(b firstAt) int {
	switch {
	case a.before(b):
		return -1
	case b.before(a):
		return 1
	}
	return 0
}

// next moves a to the chunk at pos, the next of a partition: the count of
// records restarts at a new position.
func (a *firstAt) next(pos int) {
	if int32(pos) != a.pos {
		a.pos, a.off = int32(pos), 0
	}
}

// combined is the pairs of a map or reduce task, one per key, in the order
// keys first appear.
type combined[K comparable, V any] struct {
	index map[K]int32
	pairs []Pair[K, V]
	first []firstAt // first[i] is where pairs[i]'s key first appears
}

func newCombined[K comparable, V any](hint int) *combined[K, V] {
	return &combined[K, V]{index: make(map[K]int32, hint), pairs: make([]Pair[K, V], 0, hint), first: make([]firstAt, 0, hint)}
}

// add combines v into key k's value with reduce, or adds the key, first
// seen at at.
func (c *combined[K, V]) add(k K, v V, at firstAt, reduce func(V, V) V) {
	if i, ok := c.index[k]; ok {
		c.pairs[i].Value = reduce(c.pairs[i].Value, v)
		if at.before(c.first[i]) {
			c.first[i] = at
		}
		return
	}
	c.index[k] = int32(len(c.pairs))
	c.pairs = append(c.pairs, Pair[K, V]{Key: k, Value: v})
	c.first = append(c.first, at)
}

// sort orders c's pairs by where their keys first appear. Its index is
// not kept up to date.
func (c *combined[K, V]) sort() {
	order := make([]int32, len(c.pairs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return c.first[a].compare(c.first[b]) })
	pairs, first := make([]Pair[K, V], len(order)), make([]firstAt, len(order))
	for i, j := range order {
		pairs[i], first[i] = c.pairs[j], c.first[j]
	}
	c.pairs, c.first = pairs, first
}

// keyed is a keyed operator: how a map task combines the records of one
// partition, and how values are reduced.
type keyed[T any, K comparable, V any] struct {
	seed   maphash.Seed
	reduce func(V, V) V
	// combine adds the records of partition part of in to c.
	combine func(c *combined[K, V], in *parted[T], part int)
	hint    int // most keys a task had in the previous batch, to size maps
	// maps are the map tasks' indexes of the previous batch, cleared and
	// used again: making them anew each batch costs about as much, in
	// allocation and garbage collection, as filling them. A map keeps the
	// room of the largest batch it held. Batches run one at a time, and
	// nothing keeps an index after its batch.
	maps []map[K]int32
	// spare are the map tasks' pairs and first slices of the previous
	// batch, emptied, when the shuffle copied them (several partitions):
	// used again as maps are.
	spare []*combined[K, V]
}

// task returns an empty combined for map task i, with the index that task
// i used in the previous batch.
func (kd *keyed[T, K, V]) task(i int) *combined[K, V] {
	c := &combined[K, V]{}
	if i < len(kd.spare) && kd.spare[i] != nil {
		c.pairs, c.first = kd.spare[i].pairs, kd.spare[i].first
	} else {
		c.pairs, c.first = make([]Pair[K, V], 0, kd.hint), make([]firstAt, 0, kd.hint)
	}
	if i < len(kd.maps) {
		c.index = kd.maps[i]
		clear(c.index)
	} else {
		c.index = make(map[K]int32, kd.hint)
	}
	return c
}

// keep keeps the indexes of tasks for the next batch, and their pairs if
// spare, that is if nothing refers to them any more.
func (kd *keyed[T, K, V]) keep(tasks []*combined[K, V], spare bool) {
	kd.hint = 0
	for i, c := range tasks {
		kd.hint = max(kd.hint, len(c.pairs))
		if i >= len(kd.maps) {
			kd.maps = append(kd.maps, nil)
			kd.spare = append(kd.spare, nil)
		}
		kd.maps[i], kd.spare[i] = c.index, nil
		if spare {
			clear(c.pairs) // let go of the keys and values
			kd.spare[i] = &combined[K, V]{pairs: c.pairs[:0], first: c.first[:0]}
		}
	}
}

// plan returns the stream's plan: the shuffle of the batch of s.
func (kd *keyed[T, K, V]) plan(s *Stream[T]) func(r *run) (*parted[Pair[K, V]], error) {
	return func(r *run) (*parted[Pair[K, V]], error) {
		in, err := s.parts(r)
		if err != nil || in == nil {
			return nil, err
		}
		out, err := kd.shuffle(r.ctx, max(r.par, 1), in)
		if err != nil {
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
	if n == 1 {
		c := kd.task(0)
		if err := parallel(ctx, 1, 1, func(context.Context, int) error {
			kd.combine(c, in, 0)
			return nil
		}); err != nil {
			return nil, err
		}
		kd.keep([]*combined[K, V]{c}, false) // its pairs are the result
		return c.pairs, nil
	}
	// Map side: each task combines its partition and notes the bucket of
	// each of its keys.
	tasks := make([]*combined[K, V], n)
	for i := range tasks {
		tasks[i] = kd.task(i)
	}
	buckets := make([][]uint32, n)
	err := parallel(ctx, par, n, func(_ context.Context, i int) error {
		c := tasks[i]
		kd.combine(c, in, i)
		bk := make([]uint32, len(c.pairs))
		if par > 1 { // one bucket otherwise: no hash needed
			for j, kv := range c.pairs {
				bk[j] = uint32(maphash.Comparable(kd.seed, kv.Key) % uint64(par))
			}
		}
		buckets[i] = bk
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer kd.keep(tasks, true) // the result is a copy: merge's
	// Reduce side: task p folds the keys of bucket p of every other map
	// task into those of the first, where it has them (each entry of the
	// first task is in one bucket, so one reduce task writes it, and no
	// task writes the first task's index), or into its own pairs.
	reduced := make([]*combined[K, V], par)
	err = parallel(ctx, par, par, func(_ context.Context, p int) error {
		base, own := tasks[0], newCombined[K, V](0)
		for i := 1; i < n; i++ {
			c, bk := tasks[i], buckets[i]
			for j, kv := range c.pairs {
				if bk[j] != uint32(p) {
					continue
				}
				if b, ok := base.index[kv.Key]; ok {
					base.pairs[b].Value = kd.reduce(base.pairs[b].Value, kv.Value)
					if c.first[j].before(base.first[b]) {
						base.first[b] = c.first[j]
					}
				} else {
					own.add(kv.Key, kv.Value, c.first[j], kd.reduce)
				}
			}
		}
		size := len(own.pairs)
		for _, b := range buckets[0] {
			if b == uint32(p) {
				size++
			}
		}
		out := &combined[K, V]{pairs: make([]Pair[K, V], 0, size), first: make([]firstAt, 0, size)}
		for j, b := range buckets[0] {
			if b == uint32(p) {
				out.pairs = append(out.pairs, base.pairs[j])
				out.first = append(out.first, base.first[j])
			}
		}
		out.pairs = append(out.pairs, own.pairs...)
		out.first = append(out.first, own.first...)
		out.sort()
		reduced[p] = out
		return nil
	})
	if err != nil {
		return nil, err
	}
	return merge(reduced), nil
}

// merge merges lists, each in first-appearance order, into one list in
// first-appearance order, with a binary heap of the lists' heads.
func merge[K comparable, V any](lists []*combined[K, V]) []Pair[K, V] {
	total := 0
	var heap []int // indexes of the lists not exhausted, a min-heap by head
	next := make([]int, len(lists))
	for i, l := range lists {
		total += len(l.pairs)
		if len(l.pairs) > 0 {
			heap = append(heap, i)
		}
	}
	head := func(h int) firstAt { l := heap[h]; return lists[l].first[next[l]] }
	down := func(h int) {
		for {
			m := h
			for _, c := range []int{2*h + 1, 2*h + 2} {
				if c < len(heap) && head(c).before(head(m)) {
					m = c
				}
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
		l := heap[0]
		out = append(out, lists[l].pairs[next[l]])
		if next[l]++; next[l] == len(lists[l].pairs) {
			heap[0] = heap[len(heap)-1]
			heap = heap[:len(heap)-1]
		}
		down(0)
	}
	return out
}
