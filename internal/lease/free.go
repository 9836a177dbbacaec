package lease

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/checkpointer"
)

// Free leases between scans. A lease that becomes takeable while no
// worker scans would wait for the next periodic scan (ScanInterval):
// after a reshard, the parent's owner scans when it ends the parent but
// takes the children only up to its own target, and the other workers,
// whose shard syncs saw the children's leases waiting, read nothing that
// tells them the parent ended. So a worker that would take a child whose
// parent it saw unfinished reads that parent's lease every take cycle
// (checkParents), and a shard sync that read the table asks for a scan
// when it shows a lease this worker would take (SyncShards). Neither reads
// anything in a fleet without children waiting. A takeable lease that
// stays so for unownedWarnAfter all the same is logged at WARN, once per
// episode (noteUnownedLocked), by every worker whose scan showed it and
// left it to others: it reads the lease again then (checkUnowned), and
// scans if it is unchanged, rather than waiting for its periodic scan.

// unownedWarnAfter is how long a takeable lease may stay so before it is
// logged at WARN: two lease durations, or a shard sync and a take cycle if
// longer (20 s with the Kinesis receiver's defaults). A free lease is
// taken at the next take cycle of a worker below its target, which learns
// of it within a beat and a take cycle (a drain removes its beat, an owner
// that dies stops it, checkParents) or a shard sync (a lease another
// worker created); an expired one within a take cycle of this worker's
// finding it expired, as every worker judges the dead owner at about the
// same time.
func (c *Coordinator) unownedWarnAfter() time.Duration {
	return max(2*c.cfg.LeaseDuration, c.cfg.ShardSyncInterval+c.cfg.TakeInterval)
}

// unownedLease is a lease the scans of this worker show takeable, since
// when, whether it was warned about (noteUnownedLocked), and its owner and
// counter in the last scan (checkUnowned tells by them whether it moved).
type unownedLease struct {
	since   time.Time
	warned  bool
	owner   string
	counter int64
}

// heldSetLocked returns the shards this worker counts as its own in a
// take plan: those it holds and those it asked for. c.mu must be held.
func (c *Coordinator) heldSetLocked() map[string]bool {
	held := make(map[string]bool, len(c.held)+len(c.pending))
	for shard := range c.held {
		held[shard] = true
	}
	for shard := range c.pending { // asked for: counted as this worker's
		held[shard] = true
	}
	return held
}

// wouldTakeLocked reports whether a scan would have this worker take a
// free lease, as far as the leases last seen show, with the leases in
// ended taken to be at SHARD_END: a lease unowned as seen (an expiry is
// judged by a scan), its parents done, while this worker is below its
// target. It counts every owner seen as alive, so it may say no where a
// scan would take an expired lease, never yes where a scan would take
// nothing. c.mu must be held.
func (c *Coordinator) wouldTakeLocked(ended map[string]bool) bool {
	views := make([]leaseView, 0, len(c.seen))
	for shard, s := range c.seen {
		l := s.lease
		if ended[shard] {
			l.Checkpoint = checkpointer.ShardEnd
		}
		views = append(views, leaseView{Lease: l})
	}
	views = c.withoutRefusedLocked(views)
	me, held := c.cfg.WorkerID, c.heldSetLocked()
	parentsDone := parentsDoneIn(views, c.listed)
	_, _, target := targetOf(me, views, c.cfg.MaxLeases)
	if _, needed := ownAndNeeded(me, views, held, parentsDone, target); needed <= 0 {
		return false
	}
	return slices.ContainsFunc(views, func(v leaseView) bool { return takeable(me, v, held, parentsDone) })
}

// awaitedLocked returns the parents, as last seen, that a free child lease
// waits for: not at SHARD_END, and not held by this worker, which scans
// when it ends one. c.mu must be held.
func (c *Coordinator) awaitedLocked() map[string]bool {
	awaited := make(map[string]bool)
	for _, s := range c.seen {
		if s.lease.Owner != "" || s.lease.Checkpoint == checkpointer.ShardEnd {
			continue
		}
		for _, p := range s.lease.Parents {
			ps, seen := c.seen[p]
			if _, mine := c.held[p]; seen && !mine && ps.lease.Checkpoint != checkpointer.ShardEnd {
				awaited[p] = true
			}
		}
	}
	return awaited
}

// maxParentPeeks bounds the parents checkParents reads in one take cycle.
const maxParentPeeks = 2

// checkParents reads, eventually consistently, the leases of the parents
// free children wait for (awaitedLocked), if this worker would take a
// child once they ended, and reports whether a full scan is needed: one of
// them is at SHARD_END or gone. It reads at most maxParentPeeks of them
// per take cycle, in turn (a reshard of many shards ends many parents at
// about the same time, and one found ended calls for the scan that shows
// them all), so it costs at most maxParentPeeks eventually consistent
// reads per take cycle while a child waits and this worker is below its
// target, and nothing otherwise.
func (c *Coordinator) checkParents(ctx context.Context) bool {
	c.mu.Lock()
	var peek []string
	if awaited := c.awaitedLocked(); len(awaited) > 0 && c.wouldTakeLocked(awaited) {
		peek = slices.Sorted(maps.Keys(awaited))
		if len(peek) > maxParentPeeks {
			from := c.parentTurn % len(peek)
			peek = append(peek[from:], peek[:from]...)[:maxParentPeeks]
			c.parentTurn = from + maxParentPeeks
		}
	}
	c.mu.Unlock()
	for _, p := range peek {
		l, ok, err := c.table.peek(ctx, p)
		var bad *leasetable.BadItemError
		switch {
		case errors.As(err, &bad):
			// Its children wait until it is repaired (recheckBad).
		case err != nil && ctx.Err() != nil:
		case err != nil && awserr.Refused(err):
			// A policy that grants the renewals but not GetItem: they
			// do not report it, and the children of ended shards wait
			// for the periodic scan. Said once until a read succeeds.
			if c.parentReadRefused.CompareAndSwap(false, true) {
				c.log.Warn("leasetable: reading a parent shard's lease was refused: this worker learns that a parent shard ended "+
					"only from its periodic scan, so the children of an ended shard wait up to a scan interval for it; "+
					"fix: allow dynamodb:GetItem on the lease table (docs/iam/dynamodb-leases.json lists the actions weir calls)",
					"shard", p, "scan_interval", c.cfg.ScanInterval.String(), "err", err)
			}
		case err != nil:
			// Read again next cycle. Not a WARN each cycle: a table that
			// fails reads fails the renewals too, which report it.
			c.log.Debug("leasetable: reading a parent shard's lease failed; retrying next take cycle", "shard", p, "err", err)
		case !ok || l.Checkpoint == checkpointer.ShardEnd:
			c.parentReadRefused.Store(false)
			return true
		default:
			c.parentReadRefused.Store(false)
		}
	}
	return false
}

// noteUnownedLocked records since when each lease the scan's views show
// takeable (unowned or expired, its parents done) has been so in this
// worker's scans, forgetting the others (an episode ends when a scan
// shows the lease owned, or not takeable, or checkUnowned reads it
// moved), and warns once per episode about a lease first seen so
// unownedWarnAfter or more ago. A worker below its target takes such a
// lease at its next take cycle, and the others learn of it within a take
// cycle or a shard sync, so one left that long is left by every worker:
// each is at MaxLeases (or at its target, MaxLeases capping the fleet
// below the leases), its takes fail, or one below its target missed what
// should have had it scan (it takes the lease at its periodic scan,
// ScanInterval). c.mu must be held.
func (c *Coordinator) noteUnownedLocked(views []leaseView, held map[string]bool) {
	now := c.cfg.Clock.Now()
	parentsDone := parentsDoneIn(views, c.listed)
	unowned := make(map[string]unownedLease)
	for _, v := range views {
		if !takeable(c.cfg.WorkerID, v, held, parentsDone) {
			continue
		}
		u, ok := c.unowned[v.Shard]
		if !ok {
			u = unownedLease{since: now}
		}
		u.owner, u.counter = v.Owner, v.Counter
		if d := now.Sub(u.since); !u.warned && d >= c.unownedWarnAfter() {
			u.warned = true
			c.log.Warn("leasetable: a lease that can be taken has stayed unowned, its shard unread; "+
				"fix: if every worker holds MaxLeases (leasetable.Config.MaxLeases), raise it or add workers; "+
				"else look for failed takes in the workers' logs (a worker below its target that missed it "+
				"takes it at its periodic scan, ScanInterval)",
				"shard", v.Shard, "for", d.Round(time.Second).String(), "owner", v.Owner, "max_leases", c.cfg.MaxLeases)
		}
		unowned[v.Shard] = u
	}
	c.unowned = unowned
}

// checkUnowned reads again, eventually consistently, the leases this
// worker's last scan showed takeable and did not take (noteUnownedLocked),
// once one has been so for unownedWarnAfter without a warning, at most
// maxParentPeeks per take cycle, and reports whether a full scan is
// needed: one is as the scan showed it (no worker took it), and the scan
// warns about it and takes it if this worker is below its target now. A
// lease read moved (taken, or deleted) ends its episode. Without it, a
// worker at its target that saw a lease free would say so only at its
// periodic scan (ScanInterval), if at all: the worker that missed the
// lease takes it at its own. It costs one read per lease left free that
// long, per episode, and nothing in a fleet that takes what is freed.
func (c *Coordinator) checkUnowned(ctx context.Context) bool {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	var due []string
	for shard, u := range c.unowned {
		_, held := c.held[shard]
		_, asked := c.pending[shard]
		if !u.warned && !held && !asked && now.Sub(u.since) >= c.unownedWarnAfter() {
			due = append(due, shard)
		}
	}
	c.mu.Unlock()
	slices.Sort(due)
	for _, shard := range due[:min(len(due), maxParentPeeks)] {
		l, ok, err := c.table.peek(ctx, shard)
		if err != nil {
			// Read again next cycle; an unreadable item is recheckBad's.
			if ctx.Err() == nil {
				c.log.Debug("leasetable: reading a lease left unowned failed; retrying next take cycle", "shard", shard, "err", err)
			}
			continue
		}
		c.mu.Lock()
		u, known := c.unowned[shard]
		switch {
		case !known:
		case !ok || l.Counter > u.counter || l.Owner != u.owner && l.Counter == u.counter:
			delete(c.unowned, shard) // taken, or deleted: the episode is over
		case l.Counter == u.counter:
			c.mu.Unlock()
			return true
		}
		// Else an eventually consistent read older than the scan: no news.
		c.mu.Unlock()
	}
	return false
}
