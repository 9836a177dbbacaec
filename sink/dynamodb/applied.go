package dynamodb

import (
	"context"
	"sync"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/outputid"
	"github.com/weirstream/weir/internal/runname"
)

// applied remembers the writes with versions of origin that a failed
// Write applied, or found applied, for the Write of the same batch called
// next (the output's retry, or the call with the others after
// stream.RecordErrors), which skips them. Their versions alone cannot: an
// item whose records come from several shards takes a write of another
// shard than its last, so every write of such an item applied before the
// failure would be applied again. The failed Writes of one batch by one
// output (its partitions', at once) add up. The memory holds, for each
// output of a Run, the writes of its latest batch that had a failed
// Write, forgotten once the output writes another batch or the Run ends;
// and, for the Writes called outside a Run, those of the latest maxOutside
// batches. Skipping a write applied is never wrong: keeping them longer
// costs only memory.
type applied struct {
	mu sync.Mutex
	by map[appliedKey]*appliedBatch
}

// appliedKey names whose writes an appliedBatch holds: an output of a Run
// (t 0), or, outside a Run (run ""), a batch time.
type appliedKey struct {
	run string
	out int
	t   batch.Time
}

// maxOutside is how many batches' applied writes applied keeps for the
// Writes called outside a Run.
const maxOutside = 16

// appliedBatch is the writes the failed Writes of a batch applied (prev,
// never changed once kept), each as its item's id, a 0 byte and its
// version (appliedID).
type appliedBatch struct {
	key   appliedKey
	t     batch.Time
	ended <-chan struct{} // closed once the Run ended; nil outside a Run
	prev  map[string]struct{}
}

// keyOf returns the key of the Writes of ctx in batch t, and what is
// closed once their Run ended (the Run's, not ctx's own end: a function
// may give Write a context of its own, such as a call's timeout).
func keyOf(ctx context.Context, t batch.Time) (appliedKey, <-chan struct{}) {
	if run, out, ok := outputid.InRun(ctx); ok {
		return appliedKey{run: run, out: out}, runname.Ended(ctx)
	}
	return appliedKey{t: t}, nil
}

// begin returns, for a Write of ctx in batch t, the writes the failed
// Writes of the batch by its output (outside a Run, of the batch)
// applied.
func (a *applied) begin(ctx context.Context, t batch.Time) *appliedBatch {
	key, ended := keyOf(ctx, t)
	ab := &appliedBatch{key: key, t: t, ended: ended}
	a.mu.Lock()
	defer a.mu.Unlock()
	if kept := a.by[key]; kept != nil && kept.t == t {
		ab.prev = kept.prev
	}
	return ab
}

// end adds cur, the writes of a Write that failed (appliedID of each; nil
// for a Write that succeeded), to those kept of its batch, and forgets
// those kept of another batch of its output. It drops the writes kept of
// Runs that ended.
func (a *applied) end(ab *appliedBatch, cur []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, kept := range a.by {
		select {
		case <-kept.ended: // nil outside a Run: never
			delete(a.by, k)
		default:
		}
	}
	kept := a.by[ab.key]
	if kept != nil && kept.t != ab.t {
		delete(a.by, ab.key) // the output writes another batch
		kept = nil
	}
	if len(cur) == 0 {
		return
	}
	// Those kept now, not ab.prev: another Write of the batch (another
	// partition's) may have failed since ab began.
	var prev map[string]struct{}
	if kept != nil {
		prev = kept.prev
	}
	all := make(map[string]struct{}, len(prev)+len(cur))
	for w := range prev {
		all[w] = struct{}{}
	}
	for _, w := range cur {
		all[w] = struct{}{}
	}
	if a.by == nil {
		a.by = make(map[appliedKey]*appliedBatch)
	}
	if ab.key.run == "" {
		a.dropOutside(ab.key)
	}
	a.by[ab.key] = &appliedBatch{key: ab.key, t: ab.t, ended: ab.ended, prev: all}
}

// dropOutside makes room for key among the batches kept outside a Run,
// dropping the earliest batch time's if maxOutside are kept. a.mu must be
// held.
func (a *applied) dropOutside(key appliedKey) {
	n, oldest := 0, appliedKey{}
	for k := range a.by {
		if k.run != "" || k == key {
			continue
		}
		if n++; n == 1 || k.t < oldest.t {
			oldest = k
		}
	}
	if n >= maxOutside {
		delete(a.by, oldest)
	}
}

// has reports whether a failed Write before applied the write of the item
// of id with version v.
func (ab *appliedBatch) has(id, v string) bool {
	if ab.prev == nil {
		return false // the usual case: no string made
	}
	_, ok := ab.prev[appliedID(id, v)]
	return ok
}

// appliedID names the write of the item of id with version v among those
// applied.
func appliedID(id, v string) string { return id + "\x00" + v }
