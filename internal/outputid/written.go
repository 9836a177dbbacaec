package outputid

import (
	"context"
	"sync"
)

// Written remembers, for the latest batch of a pipeline's Run that wrote
// with a sink, which output wrote each element it was given, by key: the
// item of sink/dynamodb, the origin of sink/kinesis, whose writes of one
// key by two outputs of a batch would meet and one be lost. While one
// output writes in the batch it keeps the slices it is given as they are
// (no copy, no index); once another output writes in it, it indexes them
// by key. It holds one batch's elements at most. Key must be set before
// the first Claim; the zero Written is otherwise ready. Safe for
// concurrent use.
type Written[E any, K comparable] struct {
	Key func(E) K

	mu    sync.Mutex
	run   string
	t     int64 // the batch's time
	first int   // the output that wrote first in the batch
	kept  [][]E
	by    map[K]int // once a second output writes in the batch
}

// Claim records elems as written by the output of ctx in the batch at
// time t, unless another output of the same Run wrote an element of the
// same key in that batch: it then records nothing and returns that
// output (first), ctx's (out), the element and true. A context that is
// not a pipeline output's (InRun) claims nothing.
func (w *Written[E, K]) Claim(ctx context.Context, t int64, elems []E) (first, out int, clash E, found bool) {
	run, out, ok := InRun(ctx)
	if !ok {
		return 0, 0, clash, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.run != run || w.t != t {
		w.run, w.t, w.first, w.kept, w.by = run, t, out, nil, nil
	}
	if w.by == nil {
		if out == w.first {
			w.kept = append(w.kept, elems)
			return 0, 0, clash, false
		}
		w.by = make(map[K]int)
		for _, k := range w.kept {
			for _, e := range k {
				w.by[w.Key(e)] = w.first
			}
		}
		w.kept = nil
	}
	for _, e := range elems {
		if other, ok := w.by[w.Key(e)]; ok && other != out {
			return other, out, e, true
		}
	}
	for _, e := range elems {
		w.by[w.Key(e)] = out
	}
	return 0, 0, clash, false
}
