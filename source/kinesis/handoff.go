package kinesis

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/weirstream/weir/internal/checkpointer"
)

// A lease another worker asks for (a steal towards balance) is handed off
// gracefully (lease.CoordinatorConfig.OnHandoff): the shard's reader
// stops at once, the records it stored complete, the last checkpoint
// covers them and the lease is handed off, so the new owner reads after it
// and delivers nothing twice. The records not completed within half a
// lease duration are left to the new owner (read again), since the new
// owner takes the lease anyway a lease duration after asking.

// startHandoff stops reading a shard another worker asked for; the hand-off
// itself waits for its stored records (finishHandoffs). With c nil
// (shutting down) the readers are stopped already and Drain hands the
// lease off.
func (lr *leaseRun) startHandoff(ctx context.Context, c *control, shard string) {
	if c != nil {
		if err := c.stopShard(ctx, shard); err != nil {
			lr.log.Warn("kinesis: stopping the reader of a shard asked for", "shard", shard, "err", err)
		}
	}
	lr.mu.Lock()
	owned := lr.owned[shard]
	if owned {
		lr.handing[shard] = lr.rn.clock.Now().Add(lr.cfg.LeaseDuration / 2)
		lr.log.Info("kinesis: another worker asked for a shard; stopped reading it, handing it off once what was read completes", "shard", shard)
	}
	lr.mu.Unlock()
	if owned || c == nil {
		return
	}
	if _, held := lr.heldLease(shard); !held {
		return
	}
	// Held but not read yet (its state failed to load, or waits for the
	// records of an earlier hold): nothing of this hold to complete or
	// checkpoint, so it is handed off now, not loaded and read later under
	// the lease as asked for, delivering nothing until it expires.
	if err := lr.cp.Remove(ctx, shard, nil); err != nil && ctx.Err() == nil {
		lr.log.Warn("kinesis: unregistering a shard asked for before it was read", "shard", shard, "err", err)
	}
	lr.handOff(ctx, shard)
	lr.log.Info("kinesis: another worker asked for a shard not read yet; handed it off", "shard", shard)
}

// handOff hands off shard's lease, after its last checkpoint, and forgets
// the shard and its state.
func (lr *leaseRun) handOff(ctx context.Context, shard string) {
	switch err := lr.coord.HandOff(ctx, shard); {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, checkpointer.ErrLeaseLost):
		// Nothing is wrong: the lease is where it goes anyway.
		lr.log.Info("kinesis: a shard's lease changed before its hand-off was written: the other worker took it already "+
			"(or gave it back, and this worker takes it again); nothing to do", "shard", shard, "err", err)
	default:
		lr.log.Warn("kinesis: handing a shard off failed; the lease coordinator tries again at its next take cycle", "shard", shard, "err", err)
	}
	if lr.state != nil {
		lr.state.drop(ctx, lr, shard)
	}
	lr.forget(shard)
	lr.rn.r.progress.letGo(shard, lr.rn.clock.Now())
}

// finishHandoffs hands off each shard asked for whose stored records are
// completed, or whose time is up: the last checkpoint, then the hand-off.
func (lr *leaseRun) finishHandoffs(ctx context.Context) {
	now := lr.rn.clock.Now()
	lr.mu.Lock()
	handing := maps.Clone(lr.handing)
	lr.mu.Unlock()
	var ready []string
	for shard, by := range handing {
		if !now.Before(by) || lr.allAddedCompleted(shard) {
			ready = append(ready, shard)
		}
	}
	for _, shard := range ready {
		if !lr.allAddedCompleted(shard) {
			lr.log.Warn("kinesis: the records read of a shard asked for did not complete in time; the new owner reads them again", "shard", shard)
		}
		if lr.state != nil {
			// The snapshot first: the last checkpoint stops at it, and the
			// new owner loads it.
			if err := lr.state.save(ctx, lr, shard, true); err != nil && ctx.Err() == nil {
				lr.stateFailed(shard, err)
			}
		}
		if err := lr.cp.Remove(ctx, shard, lr.coord); err != nil && !errors.Is(err, checkpointer.ErrLeaseLost) && ctx.Err() == nil {
			lr.report(fmt.Errorf("kinesis: last checkpoint of shard %s before its hand-off: %w", shard, err))
		}
		lr.handOff(ctx, shard)
		lr.log.Info("kinesis: shard handed off after its last checkpoint", "shard", shard)
	}
}

// allAddedCompleted reports whether every record of shard added to a block
// is completed, by this hold of its lease or an earlier one: the blocks its
// stopped reader left are stored only a moment later, so what is stored is
// not enough; and a hold that read again from a snapshot adds records at or
// below what an earlier hold completed, so the greatest numbers are not
// either (progress.allCompleted counts the ranges).
func (lr *leaseRun) allAddedCompleted(shard string) bool {
	return lr.rn.r.progress.allCompleted(shard)
}

// forget drops a shard this worker no longer reads from the lease run's
// records, and releases it (see control.release).
func (lr *leaseRun) forget(shard string) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	delete(lr.owned, shard)
	delete(lr.ending, shard)
	delete(lr.handing, shard)
	delete(lr.reload, shard)
	delete(lr.waiting, shard)
	lr.unloaded.Ended(shard)
	lr.unsaved.Ended(shard)
	lr.rn.r.progress.release(shard)
}
