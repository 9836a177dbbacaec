package dynamodb

import (
	"context"
	"sync"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/outputid"
)

// applied remembers, for each output of a Run (or for the calls from
// outside one), the writes with versions of origin that its last Write
// applied, or found applied, when that Write failed: the items and
// versions of the batch's records. A Write of the same batch time called
// next (the output's retry, or the call with the others after
// stream.RecordErrors) skips them. Their versions alone cannot: an item
// whose records come from several shards takes a write of another shard
// than its last, so every write of such an item applied before the
// failure would be applied again. A Write that succeeds forgets its
// batch's writes; the memory holds at most one batch per output.
type applied struct {
	mu sync.Mutex
	by map[int]*appliedBatch // by output; -1 outside a Run
}

// appliedBatch is the writes applied for one Write of an output: the
// Run's name and the batch time they are of, and each write as its item's
// id, a 0 byte and its version.
type appliedBatch struct {
	run string
	t   batch.Time

	mu     sync.Mutex
	writes map[string]struct{}
}

// begin returns the writes applied in batch t by the last failed Write
// of ctx's output, or an empty set if that Write was of another batch or
// Run, or succeeded.
func (a *applied) begin(ctx context.Context, t batch.Time) *appliedBatch {
	run, out, ok := outputid.InRun(ctx)
	if !ok {
		run, out = "", -1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ab := a.by[out]; ab != nil && ab.run == run && ab.t == t {
		return ab
	}
	return &appliedBatch{run: run, t: t}
}

// end keeps ab for the output's next Write if the Write failed, and
// forgets the output's applied writes if it succeeded.
func (a *applied) end(ctx context.Context, ab *appliedBatch, failed bool) {
	_, out, ok := outputid.InRun(ctx)
	if !ok {
		out = -1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case failed && len(ab.writes) > 0:
		if a.by == nil {
			a.by = make(map[int]*appliedBatch)
		}
		a.by[out] = ab
	default:
		delete(a.by, out)
	}
}

// has reports whether the write of the item of id with version v was
// applied.
func (ab *appliedBatch) has(id, v string) bool {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	_, ok := ab.writes[id+"\x00"+v]
	return ok
}

// add records that the write of the item of id with version v was
// applied.
func (ab *appliedBatch) add(id, v string) {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	if ab.writes == nil {
		ab.writes = make(map[string]struct{})
	}
	ab.writes[id+"\x00"+v] = struct{}{}
}
