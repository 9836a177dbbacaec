package dynamodb

import (
	"context"
	"sync"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/outputid"
)

// applied remembers the writes with versions of origin that a failed
// Write applied, or found applied, for the Write of the same batch called
// next (the output's retry, or the call with the others after
// stream.RecordErrors), which skips them. Their versions alone cannot: an
// item whose records come from several shards takes a write of another
// shard than its last, so every write of such an item applied before the
// failure would be applied again. A Write that succeeds forgets its
// batch's writes. The memory holds at most one batch for each output of a
// Run, dropped when the Run ends, and maxOutside batches of the Writes
// called outside a Run.
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

// appliedBatch is the writes applied in a batch: those of the failed
// Writes before (prev, never changed once kept) and those of the Write
// under way (cur), each as its item's id, a 0 byte and its version.
type appliedBatch struct {
	key  appliedKey
	t    batch.Time
	done <-chan struct{} // closed once the Run ended; nil outside a Run

	prev map[string]struct{}
	mu   sync.Mutex
	cur  map[string]struct{}
}

// keyOf returns the key of the Writes of ctx in batch t, and what is
// closed once their Run ended.
func keyOf(ctx context.Context, t batch.Time) (appliedKey, <-chan struct{}) {
	if run, out, ok := outputid.InRun(ctx); ok {
		return appliedKey{run: run, out: out}, ctx.Done()
	}
	return appliedKey{t: t}, nil
}

// begin returns, for a Write of ctx in batch t, the writes the failed
// Writes of the batch before it applied, if the last Write of its output
// (or, outside a Run, of the batch) failed.
func (a *applied) begin(ctx context.Context, t batch.Time) *appliedBatch {
	key, done := keyOf(ctx, t)
	ab := &appliedBatch{key: key, t: t, done: done}
	a.mu.Lock()
	defer a.mu.Unlock()
	if kept := a.by[key]; kept != nil && kept.t == t {
		ab.prev = kept.prev
	}
	return ab
}

// end keeps ab's writes, those before it and its own, for the next Write
// of its output or batch if the Write failed, and forgets them if it
// succeeded. It drops the writes kept of Runs that ended.
func (a *applied) end(ab *appliedBatch, failed bool) {
	ab.mu.Lock()
	cur := ab.cur
	ab.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, kept := range a.by {
		if kept.done != nil && closed(kept.done) {
			delete(a.by, k)
		}
	}
	if !failed || len(ab.prev)+len(cur) == 0 {
		delete(a.by, ab.key)
		return
	}
	all := make(map[string]struct{}, len(ab.prev)+len(cur))
	for w := range ab.prev {
		all[w] = struct{}{}
	}
	for w := range cur {
		all[w] = struct{}{}
	}
	if a.by == nil {
		a.by = make(map[appliedKey]*appliedBatch)
	}
	if ab.key.run == "" {
		a.dropOutside(ab.key)
	}
	a.by[ab.key] = &appliedBatch{key: ab.key, t: ab.t, done: ab.done, prev: all}
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

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// has reports whether a failed Write before applied the write of the item
// of id with version v.
func (ab *appliedBatch) has(id, v string) bool {
	_, ok := ab.prev[id+"\x00"+v]
	return ok
}

// add records that the write of the item of id with version v was
// applied.
func (ab *appliedBatch) add(id, v string) {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	if ab.cur == nil {
		ab.cur = make(map[string]struct{})
	}
	ab.cur[id+"\x00"+v] = struct{}{}
}
