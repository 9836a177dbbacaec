package leasetable

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/weirstream/weir/checkpoint"
)

// A worker's liveness, without RenewEveryLease (the default): the worker
// proves it runs by renewing one of its leases, its anchor, every
// RenewInterval (a conditional write like any renewal), and every other
// worker judges all its leases by that: an owner is alive while some lease
// it owns changed (counter or owner) less than LeaseDuration ago on the
// observer's clock. An observer reads the table whole only now and then
// (ScanInterval) or when something calls for it: at start, while it has
// leases to take or steal, when an owner's watched lease stops changing
// (a suspected death: the scan confirms it and takes the leases), moves to
// another owner or loses its owner (a release), and after it lost its own
// anchor, or finished a shard. Between scans it reads one lease per
// other worker per TakeInterval: the one of that owner that changed last.
// The cost per worker is one write per RenewInterval and one read per
// other worker per TakeInterval, whatever the number of leases.
//
// A lease this worker holds stays valid (Holds) while the anchor is renewed
// within LeaseDuration of its previous renewal, as every lease is with
// per-lease renewals. After a longer gap (a pause), or when the anchor is
// lost, each held lease is renewed once more, conditionally, before it is
// trusted again: one taken meanwhile is lost, its reader stopped.

// scanDue reports whether the next take cycle must scan the table: a scan
// was asked for, none ran yet, or the last one is ScanInterval old.
func (c *Coordinator) scanDue() bool {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.needScan || c.lastScan.IsZero() || now.Sub(c.lastScan) >= c.cfg.ScanInterval
}

// scannedLocked records a full scan; busy (it planned takes) asks for another at
// the next take cycle, until the worker has what it should. c.mu must be
// held.
func (c *Coordinator) scannedLocked(busy bool) {
	c.lastScan = c.cfg.Clock.Now()
	c.needScan = busy
}

// seeLocked records l as observed at now: its change time, and its owner's.
// c.mu must be held.
func (c *Coordinator) seeLocked(l Lease, now time.Time) {
	s, ok := c.seen[l.Shard]
	if !ok || s.lease.Counter != l.Counter || s.lease.Owner != l.Owner {
		s.changed = now
		if l.Owner != "" {
			c.ownerChanged[l.Owner] = now
		}
	}
	s.lease = l
	c.seen[l.Shard] = s
}

// ownerAliveLocked reports whether some lease owner owns changed less than
// LeaseDuration ago. c.mu must be held.
func (c *Coordinator) ownerAliveLocked(owner string, now time.Time) bool {
	t, ok := c.ownerChanged[owner]
	return ok && now.Sub(t) < c.cfg.LeaseDuration
}

// watchLocked picks, for each other owner in the last scan, the lease to
// read between scans: the one of it that changed last (its anchor, or a
// KCL worker's most recent renewal), ties broken by shard ID. It forgets
// owners that own nothing any more. c.mu must be held.
func (c *Coordinator) watchLocked() {
	watch := make(map[string]string)
	for shard, s := range c.seen {
		o := s.lease.Owner
		if o == "" || o == c.cfg.WorkerID || s.lease.Checkpoint == checkpoint.ShardEnd {
			continue
		}
		cur, ok := watch[o]
		if !ok {
			watch[o] = shard
			continue
		}
		if d := s.changed.Compare(c.seen[cur].changed); d > 0 || d == 0 && shard < cur {
			watch[o] = shard
		}
	}
	for o := range c.ownerChanged {
		if _, ok := watch[o]; !ok && o != c.cfg.WorkerID {
			delete(c.ownerChanged, o)
		}
	}
	c.watch = watch
}

// checkOwners reads each other owner's watched lease, eventually
// consistently (peek), and reports whether a full scan is needed: an owner
// looks dead (nothing of it changed for LeaseDuration), or its watched
// lease moved, went or cannot be read.
func (c *Coordinator) checkOwners(ctx context.Context) bool {
	c.mu.Lock()
	watch := maps.Clone(c.watch)
	c.mu.Unlock()
	need := false
	for owner, shard := range watch {
		l, ok, err := c.table.peek(ctx, shard)
		if err != nil {
			var bad *BadItemError
			if errors.As(err, &bad) {
				need = true
			} else if ctx.Err() == nil {
				c.log.Warn("leasetable: reading another worker's lease failed; retrying next period", "shard", shard, "err", err)
			}
			continue
		}
		now := c.cfg.Clock.Now()
		c.mu.Lock()
		if s, seen := c.seen[shard]; ok && seen && l.Counter < s.lease.Counter {
			// An eventually consistent read older than what was seen: no
			// news, neither a change nor a move.
			c.mu.Unlock()
			continue
		}
		if ok {
			c.seeLocked(l, now)
		}
		if !ok || l.Owner != owner || !c.ownerAliveLocked(owner, now) {
			need = true
		}
		c.mu.Unlock()
	}
	return need
}

// beat renews this worker's anchor lease (the one it keeps renewing, else
// the first of its leases by shard ID) and extends, on success, every held
// lease still within LeaseDuration of its last renewal. A held lease past
// it (a pause), or every one when the anchor is lost, is renewed on its own
// (renewEach) before it is trusted again. A beat that keeps failing for
// LeaseDuration loses every lease, as per-lease renewals would.
func (c *Coordinator) beat(ctx context.Context) {
	shard, h := c.anchorLease()
	if h == nil {
		return
	}
	sent, notices, err := c.renewAnchor(ctx, shard, h)
	now := c.cfg.Clock.Now()
	switch {
	case err == nil:
		c.actOnNotices(shard, notices)
		stale := false
		c.mu.Lock()
		for _, o := range c.held {
			if now.Sub(o.renewed) < c.cfg.LeaseDuration {
				if sent.After(o.renewed) {
					o.renewed = sent
				}
			} else {
				stale = true
			}
		}
		c.mu.Unlock()
		if stale {
			c.renewEach(ctx)
		}
	case errors.Is(err, checkpoint.ErrLeaseLost):
		c.lose(shard, h, err)
		c.mu.Lock()
		c.needScan = true
		c.mu.Unlock()
		c.renewEach(ctx)
	case ctx.Err() != nil:
	default:
		c.mu.Lock()
		var gone []string
		for s, o := range c.held {
			if now.Sub(o.renewed) >= c.cfg.LeaseDuration {
				gone = append(gone, s)
			}
		}
		c.mu.Unlock()
		for _, s := range gone {
			c.mu.Lock()
			o := c.held[s]
			c.mu.Unlock()
			if o != nil {
				c.lose(s, o, fmt.Errorf("not renewed for %v, other workers may take it: %w", c.cfg.LeaseDuration, err))
			}
		}
		if len(gone) == 0 {
			c.log.Warn("leasetable: lease renewal failed; retrying next period", "shard", shard, "err", err)
		}
	}
}

// anchorLease returns the lease beat renews: the current anchor if still
// held, else the held lease with the smallest shard ID; nil if none.
func (c *Coordinator) anchorLease() (string, *heldLease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.held[c.anchor]; ok {
		return c.anchor, h
	}
	c.anchor = ""
	for s := range c.held {
		if c.anchor == "" || s < c.anchor {
			c.anchor = s
		}
	}
	return c.anchor, c.held[c.anchor]
}

// renewAnchor renews h, the anchor, and returns when the renewal was sent
// (the time the worker's leases run from, see wroteAt) and the steal
// notices the anchor holds; the renewal deletes those acted on before.
// Like every write that keeps a lease, it is abandoned when the lease
// expires.
func (c *Coordinator) renewAnchor(ctx context.Context, shard string, h *heldLease) (time.Time, []string, error) {
	if err := h.sem.Acquire(ctx, 1); err != nil {
		return time.Time{}, nil, err
	}
	defer h.sem.Release(1)
	l, ok := c.current(shard, h)
	if !ok {
		return time.Time{}, nil, fmt.Errorf("leasetable: renew shard %s: %w", shard, checkpoint.ErrLeaseLost)
	}
	c.mu.Lock()
	acks := c.acks
	c.mu.Unlock()
	started := c.cfg.Clock.Now()
	wctx, cancel := c.untilExpiry(ctx, h)
	nl, notices, err := c.table.renewNoting(wctx, l, acks)
	cancel()
	if err == nil {
		c.wroteAt(h, nl, started)
	}
	return started, notices, err
}

// actOnNotices acts on the steal notices found on the anchor (see
// noteSteal): a held lease a notice names at a counter above the one this
// worker last wrote was stolen, so it is lost now, its reader stopped,
// rather than at its next checkpoint or scan. A notice of a lease this
// worker took back since (a higher counter) is stale and ignored. Every
// notice read is deleted by the next renewal of the anchor.
func (c *Coordinator) actOnNotices(anchor string, notices []string) {
	c.mu.Lock()
	c.acks = notices
	type loss struct {
		shard string
		h     *heldLease
		by    int64
	}
	var lost []loss
	for _, n := range notices {
		shard, counter, ok := parseStealNotice(n)
		if h := c.held[shard]; ok && h != nil && h.lease.Counter < counter {
			lost = append(lost, loss{shard, h, counter})
		}
	}
	c.mu.Unlock()
	for _, l := range lost {
		c.lose(l.shard, l.h, fmt.Errorf("another worker stole it (counter %d; notice on %s): %w", l.by, anchor, checkpoint.ErrLeaseLost))
	}
}

// noteSteal tells owner, whose lease l this worker just stole (now at
// counter), of the steal, by a notice on the lease of owner this worker
// watches, which is the one owner renews (its anchor) unless it changed
// since: the owner's reader of the shard then stops at its next renewal
// instead of its next checkpoint of the shard or scan, which cuts the
// records both workers deliver. Best effort, at one write per steal: a
// notice lost or left on another lease only leaves the old way. Not used
// with RenewEveryLease, whose owners renew every lease.
func (c *Coordinator) noteSteal(ctx context.Context, l Lease, counter int64) {
	if c.cfg.RenewEveryLease || l.Owner == "" || l.Owner == c.cfg.WorkerID {
		return
	}
	c.mu.Lock()
	on, ok := c.watch[l.Owner]
	alive := c.ownerAliveLocked(l.Owner, c.cfg.Clock.Now())
	c.mu.Unlock()
	if !ok || !alive || on == l.Shard {
		return // a dead owner reads nothing; a stolen anchor's owner learns it by its renewal
	}
	if _, err := c.table.noteSteal(ctx, on, l.Owner, l.Shard, counter); err != nil && ctx.Err() == nil {
		c.log.Debug("leasetable: steal notice not written", "shard", l.Shard, "owner", l.Owner, "err", err)
	}
}
