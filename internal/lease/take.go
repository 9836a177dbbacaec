package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"

	"golang.org/x/sync/errgroup"
)

// takeCycle runs one take period: it writes again the steal notices whose
// write failed, then a full cycle (scanCycle) with RenewEveryLease or when
// one is due, else a look at the unreadable items (recheckBad) and a check
// of the other workers' liveness (checkOwners), which run a full cycle
// only when they call for one, a look at the parents a free child lease
// waits for (checkParents) and at the leases left free for longer than
// expected (checkUnowned). Once taking stopped (StopTaking, Drain) it
// only writes the notices: a scan could take nothing.
func (c *Coordinator) takeCycle(ctx context.Context) {
	c.retryNotices(ctx)
	c.mu.Lock()
	draining := c.draining
	c.mu.Unlock()
	if draining {
		return
	}
	c.checkHandoffs(ctx)
	if c.cfg.RenewEveryLease || c.scanDue() || c.recheckBad(ctx) || c.checkOwners(ctx) || c.checkParents(ctx) || c.checkUnowned(ctx) {
		c.scanCycle(ctx)
	}
}

// scanCycle scans the table, updates what this worker has observed of every
// lease and beat, drops the held leases the scan shows lost, reports unreadable
// items, and takes the leases takePlan picks.
func (c *Coordinator) scanCycle(ctx context.Context) {
	c.mu.Lock()
	c.needScan = false // this scan answers what asked for one so far
	c.mu.Unlock()
	sc, err := c.table.scan(ctx)
	if err != nil {
		c.callFailed(ctx, callScan, "", "leasetable: lease scan failed; retrying every take cycle: no lease is taken, nor taken over from a dead worker, until it succeeds", err)
		c.mu.Lock()
		c.needScan = true
		c.mu.Unlock()
		return
	}
	c.callSucceeded(callScan, "")
	leases, bad := sc.leases, sc.bad
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return
	}
	c.seeScannedBeatsLocked(sc)
	c.badItemsLocked(bad)
	lost, handNow := c.lostInScanLocked(leases, bad)
	views := c.observeLocked(leases)
	c.notePendingLocked(views)
	held := c.heldSetLocked()
	for _, shard := range lost { // not taken back in the cycle that saw them go
		held[shard] = true
	}
	views = c.withoutRefusedLocked(views)
	c.forgetDeadLocked(leases)
	c.noteUnownedLocked(views, held)
	plan := takePlan(c.cfg.WorkerID, views, held, c.listed, c.cfg.MaxStealsPerCycle, c.cfg.MaxLeases)
	c.scannedLocked(len(plan) > 0)
	kills := c.killsLocked(plan)
	done := finishedLeases(views, c.children)
	steal := make(map[string]bool)
	for _, v := range views {
		if v.Owner != "" && v.Owner != c.cfg.WorkerID && !v.expired && !c.dead[v.Owner] {
			steal[v.Shard] = true // a live worker's: asked for, not taken
		}
	}
	c.mu.Unlock()
	for _, l := range handNow {
		c.handOffNow(ctx, l)
	}
	defer c.deleteFinished(ctx, done)
	plan = c.killDead(ctx, plan, kills)
	// The takes run at once (bounded): a worker starting on many shards
	// reads them sooner, and each take is a single-item conditional write.
	var g errgroup.Group
	g.SetLimit(renewParallelism)
	for _, l := range plan {
		if steal[l.Shard] {
			g.Go(func() error { c.requestHandoff(ctx, l); return nil })
			continue
		}
		g.Go(func() error { c.take(ctx, l); return nil })
	}
	_ = g.Wait() // the goroutines return nil
}

// killsLocked returns the beats to remove (killBeat) before the leases in
// plan taken for dead (not stolen from a live owner) are taken: beat
// attribute -> its beat as last seen. Earlier workers of StateDir are
// known gone, and an owner without a beat has none to remove. c.mu must be
// held.
func (c *Coordinator) killsLocked(plan []Lease) map[string]beatSeen {
	now := c.cfg.Clock.Now()
	dead := make(map[string]bool)
	for _, l := range plan {
		for _, o := range []string{l.Owner, l.CheckpointOwner} { // and a holder handing it off
			if o != "" && o != c.cfg.WorkerID && !c.dead[o] && !c.ownerAliveLocked(o, now) {
				dead[o] = true
			}
		}
	}
	return c.beatsOfLocked(dead)
}

// beatsOfLocked returns the beats seen of the workers in dead: beat
// attribute -> its beat as last seen. c.mu must be held.
func (c *Coordinator) beatsOfLocked(dead map[string]bool) map[string]beatSeen {
	kills := make(map[string]beatSeen)
	for name, s := range c.beats {
		if dead[s.worker] {
			kills[name] = s
		}
	}
	return kills
}

// killDead removes the beats in kills from the items they are on and
// returns plan without the leases of the workers whose beat could not be
// removed: it changed since it was seen (the worker is alive after all,
// recorded as such), or the write failed (the leases are looked at again
// next cycle).
func (c *Coordinator) killDead(ctx context.Context, plan []Lease, kills map[string]beatSeen) []Lease {
	if len(kills) == 0 {
		return plan
	}
	spared := make(map[string]bool)
	for name, b := range kills {
		killed, err := c.table.killBeat(ctx, b.on, name, b.n)
		now := c.cfg.Clock.Now()
		c.mu.Lock()
		switch {
		case killed:
			delete(c.beats, name)
		case err == nil:
			b.changed = now
			c.beats[name] = b
			c.ownerChanged[b.worker] = now
		}
		c.mu.Unlock()
		switch {
		case killed:
		case err == nil:
			spared[b.worker] = true
			c.log.Info("leasetable: a worker taken for dead beat again; its leases are left to it", "owner", b.worker)
		default:
			spared[b.worker] = true
			if ctx.Err() == nil {
				c.log.Warn("leasetable: removing a dead worker's beat failed; its leases are taken once that succeeds", "owner", b.worker, "err", err)
			}
		}
	}
	return slices.DeleteFunc(plan, func(l Lease) bool { return spared[l.Owner] || spared[l.CheckpointOwner] })
}

// seeScannedBeatsLocked makes the scanned lease with the smallest leaseKey
// the board and records the beats on every lease: those on the board, and
// those on boards other workers picked from older scans, so that their
// workers are not taken for dead. c.mu must be held.
func (c *Coordinator) seeScannedBeatsLocked(sc scanned) {
	c.board = ""
	for _, l := range sc.leases {
		if c.board == "" || l.Shard < c.board {
			c.board = l.Shard
		}
	}
	all := make(map[string]beatVal)
	on := make(map[string]string)
	for item, beats := range sc.beats {
		for name, b := range beats {
			if a, ok := all[name]; !ok || b.n > a.n {
				all[name], on[name] = b, item
			}
		}
	}
	c.seeBeatsLocked(all, "", on, !c.table.eventualScans, c.cfg.Clock.Now())
}

// lostInScanLocked drops every held lease that the scan shows owned by
// another worker, unreadable or deleted, reporting the loss before anything else
// can happen for the shard: a worker that was paused learns of a take-over
// here at the latest, and its reader stops before any take of the same
// shard. c.mu must be held; takes of this worker run after the scan, so an
// owner other than this worker in it is another worker's write.
func (c *Coordinator) lostInScanLocked(leases []Lease, bad []*leasetable.BadItemError) (lost []string, handNow []Lease) {
	drop := func(shard string, why error) {
		if _, ok := c.held[shard]; !ok {
			return
		}
		delete(c.held, shard)
		c.queueLocked(leaseEvent{lost: shard})
		lost = append(lost, shard)
		// This scan's plan counts it as held; the next take cycle scans
		// again, so that a worker resumed from a pause takes its share
		// back then, not at its next periodic scan (ScanInterval).
		c.needScan = true
		c.log.Info("leasetable: lease lost", "shard", shard, "err", why)
	}
	for _, l := range leases {
		if h := c.held[l.Shard]; h != nil && l.Owner != c.cfg.WorkerID && l.CheckpointOwner == c.cfg.WorkerID {
			// Asked for by its owner: handed off, not lost (see handoff.go).
			if c.handoffLocked(l.Shard, h, l) {
				handNow = append(handNow, l)
			}
			continue
		}
		if _, held := c.held[l.Shard]; !held && l.Owner != c.cfg.WorkerID && l.CheckpointOwner == c.cfg.WorkerID {
			handNow = append(handNow, l) // asked for before this worker took it, or after it let it go
			continue
		}
		if l.Owner != c.cfg.WorkerID {
			drop(l.Shard, fmt.Errorf("the lease table shows owner %q, counter %d: %w", l.Owner, l.Counter, checkpointer.ErrLeaseLost))
		}
	}
	for _, b := range bad {
		drop(b.Key, b)
	}
	inScan := make(map[string]bool, len(leases))
	for _, l := range leases {
		inScan[l.Shard] = true
	}
	for shard := range c.held {
		// Its item was deleted (by hand, or a KCL's clean-up): another
		// worker's shard sync may create and take it again.
		if !inScan[shard] {
			drop(shard, fmt.Errorf("its lease item was deleted: %w", checkpointer.ErrLeaseLost))
		}
	}
	return lost, handNow
}

// observeLocked records the scanned leases and returns them with their
// expiry, judged on this worker's clock only (KCL's rule: no clock is
// compared across workers). With RenewEveryLease, a lease is expired when
// its counter and owner have not changed for LeaseDuration, as the KCL
// judges it; otherwise when no lease of its owner has changed for
// LeaseDuration (see ownerAlive). A lease first seen now is not expired
// unless unowned; a gone worker's (StateDir) is expired at once.
func (c *Coordinator) observeLocked(leases []Lease) []leaseView {
	now := c.cfg.Clock.Now()
	seen := make(map[string]seenLease, len(leases))
	for _, l := range leases {
		c.seeLocked(l, now)
		seen[l.Shard] = c.seen[l.Shard]
	}
	for shard, s := range c.seen {
		if _, ok := seen[shard]; !ok && len(s.lease.Parents) > 0 {
			c.treeChangedLocked() // its lease is gone: its parents with it
			break
		}
	}
	c.seen = seen
	c.watchLocked()
	views := make([]leaseView, 0, len(leases))
	for _, l := range leases {
		var expired bool
		switch {
		case l.Owner == "":
		case c.dead[l.Owner]:
			expired = true
		case c.cfg.RenewEveryLease:
			// As the KCL judges a lease; but an owner that beats (a
			// worker without RenewEveryLease in a fleet changing its
			// setting) renews none of its leases, and is judged by its
			// beat, which is removed before its leases are taken.
			expired = now.Sub(c.seen[l.Shard].changed) >= c.cfg.LeaseDuration &&
				(!c.beatsLocked(l.Owner) || !c.ownerAliveLocked(l.Owner, now))
		default:
			expired = l.Owner != c.cfg.WorkerID && !c.ownerAliveLocked(l.Owner, now)
		}
		if h := l.CheckpointOwner; expired && h != "" && h != l.Owner {
			// Under hand-off: its holder reads it until it hands it off.
			expired = h != c.cfg.WorkerID && (c.dead[h] || !c.ownerAliveLocked(h, now))
		}
		views = append(views, leaseView{Lease: l, expired: expired})
	}
	return views
}

// take takes l; losing the race to another worker is normal and only logged.
func (c *Coordinator) take(ctx context.Context, l Lease) {
	started := c.cfg.Clock.Now() // the lease is this worker's from when the take was sent, no earlier
	nl, err := c.table.take(ctx, l, c.cfg.WorkerID, c.latestPin(l))
	switch {
	case errors.Is(err, checkpointer.ErrLeaseLost):
		c.callSucceeded(callTake, l.Shard) // DynamoDB answered
		c.log.Debug("leasetable: another worker took the lease first", "shard", l.Shard)
		c.mu.Lock()
		c.needScan = true // or asked for it: the next scan tells
		c.mu.Unlock()
		return
	case err != nil:
		c.callFailed(ctx, callTake, l.Shard, "leasetable: taking a lease failed; trying again at the next take cycle", err, "shard", l.Shard)
		return
	}
	c.callSucceeded(callTake, l.Shard)
	h := &heldLease{sem: semaphore.NewWeighted(1), lease: nl, renewed: started, taken: nl.Counter}
	c.mu.Lock()
	if l.Owner == c.cfg.WorkerID && !c.cfg.RenewEveryLease {
		h.retakenAt = c.beatSeq + 1
	}
	if c.draining { // Drain began during the take: hand it back at once
		c.mu.Unlock()
		if _, err := c.table.Release(ctx, nl); err != nil {
			c.log.Warn("leasetable: releasing a lease taken while draining failed", "shard", l.Shard, "err", err)
		}
		return
	}
	if _, ok := c.held[l.Shard]; ok {
		// Never expected (a take plan leaves held shards out), but the
		// old reader must stop before the new one starts, whatever happens.
		c.queueLocked(leaseEvent{lost: l.Shard})
	}
	c.held[l.Shard] = h
	c.forgetWalkLocked(l.Shard)
	c.queueLocked(leaseEvent{acquired: &nl})
	c.mu.Unlock()
	verb := "took"
	if l.Owner != "" && l.Owner != c.cfg.WorkerID {
		verb = "took over"
	}
	c.log.Info("leasetable: "+verb+" lease", "shard", l.Shard, "from", l.Owner, "checkpoint", nl.Checkpoint)
	c.noteSteal(ctx, l, nl.Counter)
}

// latestPin returns the time to pin l at if it is a lease at LATEST without
// a pin (see Table.take), else the zero time. A lease at LATEST is pinned
// by its first take to a time before this worker's reader starts, so that
// whoever reads the shard next, if this worker dies before its first
// checkpoint, starts no later: LatestMargin before the take, on the earlier
// of this worker's clock and DynamoDB's (Table.server), which Kinesis's
// agrees with. A pin from a clock running ahead of Kinesis's by more than
// LatestMargin would lie in Kinesis's future: it refuses an iterator there,
// and once that time has come, whoever reads from the pin skips what was
// put before it. A pin too early only delivers records put before the take
// (as many as this worker's clock is behind), so the earlier clock is
// taken: DynamoDB's time is a stand-in for Kinesis's that a test's fake
// Kinesis on a virtual clock, or a DynamoDB with a wrong clock, would
// make wrong. The first time this worker's clock is found off by more than
// LatestMargin, it says so at WARN.
func (c *Coordinator) latestPin(l Lease) time.Time {
	if l.Checkpoint != checkpointer.LatestPosition || !l.LatestAt.IsZero() {
		return time.Time{}
	}
	at := c.cfg.Clock.Now()
	offset, known := c.table.server.offset()
	if offset < 0 {
		at = at.Add(offset) // ahead of DynamoDB's clock: DynamoDB's
	}
	if known && (offset > LatestMargin || offset < -LatestMargin) && c.skewWarned.CompareAndSwap(false, true) {
		by := offset.Abs().Round(time.Second).String()
		what := "ahead of DynamoDB's by about " + by + " (the Date of its answers); leases at LATEST are pinned on DynamoDB's clock instead"
		if offset > 0 {
			what = "behind DynamoDB's by about " + by + " (the Date of its answers); a lease at LATEST it pins is read from that long before its take"
		}
		c.log.Warn("leasetable: this worker's clock runs "+what+"; fix: synchronise this machine's clock (NTP)", "shard", l.Shard)
	}
	return at.Add(-LatestMargin)
}

// syncListed calls ListShards and SyncShards, logging failures.
func (c *Coordinator) syncListed(ctx context.Context) {
	shards, err := c.cfg.ListShards(ctx)
	if err != nil {
		err = listError{err}
	} else {
		err = c.SyncShards(ctx, shards)
	}
	if err != nil {
		c.callFailed(ctx, callSync, "", "leasetable: shard sync failed; retrying every ShardSyncInterval: a new shard (after a reshard) gets no lease, and is not read, until it succeeds", err)
		return
	}
	c.callSucceeded(callSync, "")
}

// listError is ListShards's error: the stream's (Kinesis), not the lease
// table's, and its fix is not the lease table's (see callFix).
type listError struct{ err error }

func (e listError) Error() string { return e.err.Error() }
func (e listError) Unwrap() error { return e.err }

// SyncShards creates a lease, unowned, for every shard of shards that has
// none, unless a descendant of it among shards has a lease (it was read
// to its end and its lease deleted, see finishedLeases). A new lease
// starts at the checkpoint this worker last saw or wrote for the shard (a
// lease item deleted by hand is not moved past what was not processed);
// else, for a shard with a parent among shards, in the table or seen by
// this worker, at checkpointer.TrimHorizon, so that nothing written to it
// while its parent was read is skipped; else at InitialPosition. Leases of
// shards not listed are left alone. When it read the table and the table
// shows a lease this worker would take (another worker created it, or its
// parent ended since this worker last scanned), the next take cycle scans.
// It is safe to call from several workers at once.
func (c *Coordinator) SyncShards(ctx context.Context, shards []ShardInfo) error {
	c.learnChildren(shards)
	if c.allKnown(shards) { // the table is read only for a shard without a lease
		return nil
	}
	leases, bad, err := c.table.ListAll(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	now := c.cfg.Clock.Now()
	for _, l := range leases { // a scan is a scan: what it shows counts
		c.seeLocked(l, now)
	}
	if c.wouldTakeLocked(nil) {
		// A lease this worker would take, which it may not have scanned
		// yet: another worker's shard sync created it, or its parent ended.
		c.needScan = true
	}
	c.mu.Unlock()
	known := make(map[string]bool, len(leases)+len(bad)+len(shards))
	for _, l := range leases {
		known[l.Shard] = true
	}
	for _, b := range bad { // it has an item, if a broken one: never overwritten
		known[b.Key] = true
	}
	exists := make(map[string]bool, len(known))
	for k := range known {
		exists[k] = true
	}
	for _, s := range shards {
		known[s.ID] = true
	}
	begun := make(map[string]bool, len(leases))
	for _, l := range leases {
		begun[l.Shard] = hasBegun(l)
	}
	descended := leasedDescendants(shards, begun)
	// A shard with a child whose lease exists had a lease of its own
	// (the shard sync creates a parent's with its children's): if it has
	// none now, it was deleted before it ended (a finished one is not
	// created again, above).
	closed := make(map[string]bool)
	for _, s := range shards {
		if exists[s.ID] {
			for _, p := range s.ParentIDs {
				closed[p] = true
			}
		}
	}
	c.mu.Lock()
	for id := range descended {
		if !exists[id] {
			// Read to its end and its lease deleted, maybe before this
			// worker saw it at SHARD_END: finished for good (Finished).
			c.known[id] = checkpointer.ShardEnd
		}
	}
	seen := maps.Clone(c.known)
	c.mu.Unlock()
	var (
		g    errgroup.Group
		mu   sync.Mutex
		errs []error
	)
	g.SetLimit(renewParallelism) // each create is one conditional PutItem
	for _, s := range shards {
		if exists[s.ID] || descended[s.ID] {
			continue
		}
		l := Lease{Shard: s.ID, Checkpoint: startOf(s, known, seen, c.cfg.InitialPosition, closed[s.ID]), Parents: s.ParentIDs,
			StartingHashKey: s.StartingHashKey, EndingHashKey: s.EndingHashKey}
		g.Go(func() error {
			created, err := c.table.Create(ctx, l)
			switch {
			case err != nil:
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			case created:
				c.log.Info("leasetable: lease created", "shard", s.ID, "checkpoint", l.Checkpoint, "parents", s.ParentIDs)
				c.mu.Lock()
				c.needScan = true // a new lease to take
				c.mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines return nil
	if len(errs) > 0 {
		return fmt.Errorf("leasetable: sync shards: %w", errors.Join(errs...))
	}
	return nil
}

// allKnown reports whether every shard of shards had a lease item in the
// last scan, or has a descendant among shards whose lease it showed begun
// and is known finished: read to its end, its lease deleted
// (finishedLeases), and never created again (SyncShards), while Kinesis
// lists it for the retention period.
func (c *Coordinator) allKnown(shards []ShardInfo) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var descended map[string]bool
	for _, s := range shards {
		_, seen := c.seen[s.ID]
		if _, bad := c.bad[s.ID]; seen || bad {
			continue
		}
		if descended == nil {
			begun := make(map[string]bool, len(c.seen))
			for id, sl := range c.seen {
				begun[id] = hasBegun(sl.lease)
			}
			descended = leasedDescendants(shards, begun)
		}
		if !descended[s.ID] || c.known[s.ID] != checkpointer.ShardEnd {
			return false // else the table is read once: SyncShards records it finished (Finished)
		}
	}
	return true
}
