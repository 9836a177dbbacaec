package lease

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/internal/checkpointer"
)

// A graceful hand-off, as the KCL 3.x hands a lease over: a worker stealing
// a live worker's lease towards balance does not take it but asks for it
// (requestHandoff): it names itself leaseOwner and the holder
// checkpointOwner, conditional on the counter, and leaves a steal notice.
// The holder learns at its next beat (or scan), stops reading the shard
// (OnHandoff; Holds is false from then on), lets what it read complete,
// commits the last checkpoint and hands the lease off (HandOff: removes
// checkpointOwner); its writes stay conditional on the counter, which no
// one else writes meanwhile. The thief looks at the lease every take cycle
// (checkHandoffs) and takes it once checkpointOwner is gone, from the last
// checkpoint, so nothing is delivered twice; or after LeaseDuration
// whatever the holder did (paused, dead, or not handing off), as any take.

// requestHandoff asks l's holder, a live worker, to hand it off to this
// worker, and tells it by a steal notice.
func (c *Coordinator) requestHandoff(ctx context.Context, l Lease) {
	nl, err := c.table.requestHandoff(ctx, l, c.cfg.WorkerID)
	switch {
	case errors.Is(err, checkpointer.ErrLeaseLost):
		c.log.Debug("leasetable: the lease changed before a hand-off was asked for", "shard", l.Shard)
		return
	case err != nil:
		if ctx.Err() == nil {
			c.log.Warn("leasetable: asking for a hand-off failed", "shard", l.Shard, "err", err)
		}
		return
	}
	c.mu.Lock()
	if c.draining {
		// Drain gave up the hand-offs it knew of before this one was
		// answered: give it up too, or it stays with this worker, gone,
		// until it expires.
		c.mu.Unlock()
		if err := c.giveUp(ctx, l.Shard); err != nil {
			c.log.Warn("leasetable: giving up a hand-off asked for while draining failed", "shard", l.Shard, "err", err)
		}
		return
	}
	c.pending[l.Shard] = c.cfg.Clock.Now()
	c.mu.Unlock()
	c.log.Info("leasetable: asked for a lease's hand-off", "shard", l.Shard, "from", l.Owner)
	c.noteSteal(ctx, l, nl.Counter)
}

// checkHandoffs reads each lease this worker asked for and takes it once
// its holder handed it off. A holder that has not, LeaseDuration after the
// request, is judged as an owner is: if it looks dead (its beat stood
// still), its beat is removed first (killDead), so that, if it was only
// paused, it trusts none of its leases again before renewing each; if it
// is alive, it learns of the request at its next beat, checkpoint or scan
// and hands off, and the lease is taken without it only once a scan of it
// is sure to have happened (ScanInterval + LeaseDuration after the
// request: a worker of a version without hand-offs drops the lease then).
func (c *Coordinator) checkHandoffs(ctx context.Context) {
	c.mu.Lock()
	pending := maps.Clone(c.pending)
	c.mu.Unlock()
	for shard, at := range pending {
		l, ok, err := c.table.Get(ctx, shard)
		if err != nil {
			continue // read again next cycle; the lease stays this worker's in the table
		}
		now := c.cfg.Clock.Now()
		asked := ok && l.Owner == c.cfg.WorkerID && l.CheckpointOwner != ""
		if asked && now.Sub(at) < c.cfg.LeaseDuration {
			continue
		}
		if asked {
			holder := l.CheckpointOwner
			c.mu.Lock()
			alive := c.ownerAliveLocked(holder, now)
			kills := c.beatsOfLocked(map[string]bool{holder: true})
			c.mu.Unlock()
			switch {
			case alive && now.Sub(at) < c.cfg.ScanInterval+c.cfg.LeaseDuration:
				continue
			case alive: // its scan since showed it the request: it trusts the lease no more
			case len(c.killDead(ctx, []Lease{{Shard: shard, Owner: holder}}, kills)) == 0:
				continue // it beat again: alive after all
			}
			c.log.Warn("leasetable: a lease was not handed off in time; taking it from its last checkpoint",
				"shard", shard, "holder", holder, "checkpoint", l.Checkpoint)
		}
		c.mu.Lock()
		draining := c.draining
		if !draining {
			// Draining, it is left to Drain, which gives it up
			// (dropPending), or did already.
			delete(c.pending, shard)
		}
		_, held := c.held[shard]
		c.mu.Unlock()
		if ok && l.CheckpointOwner == c.cfg.WorkerID && !held {
			// Asked for by another worker before this one took it.
			c.handOffNow(ctx, l)
		}
		if !ok || l.Owner != c.cfg.WorkerID || draining {
			continue // taken or deleted meanwhile: the next scan sees it
		}
		c.take(ctx, l)
	}
}

// notePendingLocked records as pending the leases a scan shows asked for
// by this worker that it does not know of (a hand-off asked for before a
// restart), so they are taken once handed off. c.mu must be held.
func (c *Coordinator) notePendingLocked(views []leaseView) {
	for _, v := range views {
		if v.Owner != c.cfg.WorkerID || v.CheckpointOwner == "" || v.CheckpointOwner == c.cfg.WorkerID {
			continue
		}
		if _, ok := c.pending[v.Shard]; !ok {
			if _, held := c.held[v.Shard]; !held {
				c.pending[v.Shard] = c.cfg.Clock.Now()
			}
		}
	}
}

// handoffLocked starts handing off h, shard's held lease, now l (another
// worker its owner, this one its checkpointOwner): the caller is told
// (OnHandoff) or, without OnHandoff, the lease is lost now and handed off
// by the caller of handoffLocked (it returns true). A hand-off under way
// goes on, on l if it is later than h's lease: given back since and asked
// for again, by the same worker or another, the lease is handed off as
// asked for now, the caller's last checkpoint written on it. c.mu must be
// held.
func (c *Coordinator) handoffLocked(shard string, h *heldLease, l Lease) (now bool) {
	if h.handoff {
		if l.Counter > h.lease.Counter {
			c.setHeldLeaseLocked(h, l)
			h.unsure, h.unsureSince = nil, time.Time{}
			c.log.Info("leasetable: a lease being handed off was asked for again; handing it off to the worker that asked", "shard", shard, "to", l.Owner)
		}
		return false
	}
	h.handoff = true
	c.setHeldLeaseLocked(h, l)
	// Writes without an answer were written on the lease before: the
	// request is conditional on the counter they moved.
	h.unsure, h.unsureSince = nil, time.Time{}
	c.needScan = true // the next take cycle looks at the balance without it
	c.log.Info("leasetable: another worker asked for a lease; handing it off after the last checkpoint", "shard", shard, "to", l.Owner)
	if c.cfg.OnHandoff == nil {
		delete(c.held, shard)
		c.givenLocked(shard)
		c.queueLocked(leaseEvent{lost: shard})
		return true
	}
	c.queueLocked(leaseEvent{handoff: shard})
	return false
}

// handingOff reports whether h is being handed off.
func (c *Coordinator) handingOff(h *heldLease) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return h.handoff
}

// HandOff completes the hand-off of shard's lease that another worker asked
// for (see OnHandoff), after the caller's last checkpoint of it (Commit):
// the lease becomes the other worker's, which reads after that checkpoint.
// This worker holds it no more; no OnLost is reported. It returns an error
// wrapping checkpointer.ErrLeaseLost if the other worker took it meanwhile
// (it waited LeaseDuration), and nil for a shard not held or not being
// handed off. A write that failed otherwise is tried again by the next
// take cycle, whose scan hands the lease off.
func (c *Coordinator) HandOff(ctx context.Context, shard string) error {
	return c.letGo(ctx, shard, "hand off", c.handingOff, nil, func(l Lease) error {
		if _, err := c.table.handOff(ctx, l); err != nil {
			// The next take cycle scans, not the next periodic scan. The
			// lease changed (ErrLeaseLost): maybe given back to this
			// worker (the asker drained, dropPending), which every other
			// worker trusts while this one beats: the scan takes it back.
			// The write failed: the lease still names this worker its
			// checkpointOwner, and the asker, seeing it alive, waits
			// ScanInterval + LeaseDuration for it, the shard read by no
			// one: the scan hands it off again (lostInScanLocked).
			c.mu.Lock()
			c.needScan = true
			c.mu.Unlock()
			return err
		}
		if l.Owner == c.cfg.WorkerID {
			// The asker gave it back, and the last checkpoint was
			// written on it (whyRefused, refusedGivenBack): it is this
			// worker's, unheld, which the next take cycle's scan takes
			// back from that checkpoint.
			c.mu.Lock()
			c.needScan = true
			c.mu.Unlock()
			c.log.Info("leasetable: the worker that asked for a lease gave it back; taking it again from its last checkpoint", "shard", shard, "checkpoint", l.Checkpoint)
			return nil
		}
		c.log.Info("leasetable: lease handed off", "shard", shard, "to", l.Owner, "checkpoint", l.Checkpoint)
		return nil
	})
}

// handOffNow hands off at once a lease whose hand-off no caller handles
// (no OnHandoff), or that a scan shows asked for and not held. A write
// that failed (not refused: the lease changed since) is tried again by the
// next take cycle's scan; the other worker takes the lease in time
// otherwise.
func (c *Coordinator) handOffNow(ctx context.Context, l Lease) {
	_, err := c.table.handOff(ctx, l)
	if err == nil || ctx.Err() != nil {
		return
	}
	c.log.Debug("leasetable: handing a lease off failed; trying again at the next take cycle", "shard", l.Shard, "err", err)
	if !errors.Is(err, checkpointer.ErrLeaseLost) {
		c.mu.Lock()
		c.needScan = true
		c.mu.Unlock()
	}
}

// requestHandoff names newOwner the owner of l, and l's owner its
// checkpointOwner, if the counter and owner are still l's and no hand-off
// is under way, and returns the lease as written.
func (t *Table) requestHandoff(ctx context.Context, l Lease, newOwner string) (Lease, error) {
	return t.updateIf(ctx, "ask for", l, ", #owner = :newowner, #ckptowner = :owner, #switches = if_not_exists(#switches, :zero) + :one",
		map[string]types.AttributeValue{":newowner": str(newOwner), ":zero": num(0)}, "attribute_not_exists(#ckptowner)")
}

// handOff completes a hand-off: it removes l's checkpointOwner, leaving
// the lease to its owner, if the counter and owner are still l's.
func (t *Table) handOff(ctx context.Context, l Lease) (Lease, error) {
	return t.update(ctx, "hand off", l, " REMOVE #ckptowner", nil)
}

// dropAsked gives up a lease this worker (l's owner) asked for and no
// longer wants, if the counter and owner are still l's: back to its holder
// (l.CheckpointOwner) if it has not handed it off yet, else freed.
func (t *Table) dropAsked(ctx context.Context, l Lease) (Lease, error) {
	if l.CheckpointOwner == "" {
		return t.update(ctx, "release", l, " REMOVE #owner", nil)
	}
	return t.update(ctx, "give back", l, ", #owner = :holder REMOVE #ckptowner",
		map[string]types.AttributeValue{":holder": str(l.CheckpointOwner)})
}

// refusal is what a write of a held lease that failed its condition met,
// as the lease read back shows (whyRefused).
type refusal int

const (
	// refusedLost: the lease was taken, or could not be read back.
	refusedLost refusal = iota
	// refusedAsked: another worker asked for the lease (a hand-off,
	// started now) rather than took it.
	refusedAsked
	// refusedLanded: the write itself had been applied. Its answer was
	// lost (an attempt timed out, a connection reset), the SDK sent it
	// again, and the retry failed the condition the first attempt had
	// moved on (the counter).
	refusedLanded
	// refusedGivenBack: another worker asked for the lease and gave it
	// back (it drained: dropPending), before this worker learned of the
	// request or while it was handing the lease off; the lease is this
	// worker's as it left it, at a later counter, and the write is sent
	// again on it.
	refusedGivenBack
)

// whyRefused reads shard's lease after a write w of h failed its condition
// and reports what happened, with the lease read back (see ownWrite for
// refusedLanded and refusedGivenBack; the latter only while h is still
// shard's held lease, whether or not its hand-off started while w was in
// flight). It also reports the item if it is unreadable
// (checkWrittenItem).
func (c *Coordinator) whyRefused(ctx context.Context, shard string, h *heldLease, err error, w ownWrite) (Lease, refusal) {
	if !errors.Is(err, checkpointer.ErrLeaseLost) || ctx.Err() != nil {
		c.checkWrittenItem(err, nil)
		return Lease{}, refusedLost
	}
	l, ok, gerr := c.table.Get(ctx, shard)
	c.checkWrittenItem(err, gerr)
	switch {
	case gerr != nil || !ok:
		return Lease{}, refusedLost
	case w.landed(c.cfg.WorkerID, l):
		return l, refusedLanded
	case w.givenBack(c.cfg.WorkerID, l):
		// Whether or not a hand-off started since the write was sent (a
		// scan saw the request meanwhile: h.handoff, the caller told):
		// the lease is this worker's as the write left it. A hand-off
		// started goes on as one the asker gave back while it was under
		// way: the caller's last checkpoint lands on the lease given
		// back, HandOff finds the lease this worker's and the next take
		// cycle takes it back from that checkpoint.
		c.mu.Lock()
		mine := c.held[shard] == h
		c.mu.Unlock()
		if !mine {
			return l, refusedLost
		}
		return l, refusedGivenBack
	case l.Owner == c.cfg.WorkerID || l.CheckpointOwner != c.cfg.WorkerID:
		return l, refusedLost
	}
	c.mu.Lock()
	if c.held[shard] != h {
		c.mu.Unlock()
		return l, refusedLost
	}
	now := c.handoffLocked(shard, h, l)
	c.mu.Unlock()
	if now {
		c.handOffNow(ctx, l)
	}
	return l, refusedAsked
}

// ownWrite is a conditional write of a held lease by this worker, as
// whyRefused judges the lease read back after the write was refused.
type ownWrite struct {
	// from is the lease written on (the held lease as last written).
	from Lease
	// ckpts are the checkpoint the write sets (from's own, for a
	// renewal), then those of the earlier writes of the lease without an
	// answer (heldLease.unsure).
	ckpts []string
}

// landedAs returns the write of l by this worker that sets the checkpoint
// to ckpt (l's own, for a renewal), with h's writes without an answer.
func (c *Coordinator) landedAs(h *heldLease, l Lease, ckpt string) ownWrite {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ownWrite{from: l, ckpts: append([]string{ckpt}, h.unsure...)}
}

// landed reports whether now, read back, is the lease the write itself, or
// an earlier one of it without an answer, left: worker still its owner,
// the checkpoint owner unchanged, the counter one past from's, and the
// checkpoint written. Only worker's own writes of the lease, one at a
// time, leave it so: any other worker's write changes the owner or the
// checkpoint owner.
func (w ownWrite) landed(worker string, now Lease) bool {
	return now.Owner == worker && now.Owner == w.from.Owner && now.CheckpointOwner == w.from.CheckpointOwner &&
		now.Counter == w.from.Counter+1 && slices.Contains(w.ckpts, now.Checkpoint)
}

// givenBack reports whether now, read back, is the lease as worker left
// it, asked for by another worker and given back by it (Table.dropAsked)
// since: worker its owner again, no checkpoint owner, and the checkpoint
// from's or one of the write's (it, or an earlier one without an answer,
// landed before the request). Either from is the lease held by worker as
// it was before the request (its hand-off maybe started since, by a scan
// while the write was in flight), and the counter is at least two past
// from's (the request and the give-back each add one); or from is the lease being
// handed off (another worker its owner, worker its checkpoint owner), and
// the counter at least one past from's (the give-back). No other worker
// moves a checkpoint on a lease named worker's, so it is worker's lease
// still, and the write is sent again on it: refused for a loss instead,
// the records read since from's checkpoint would be read twice by the next
// owner.
func (w ownWrite) givenBack(worker string, now Lease) bool {
	if now.Owner != worker || now.CheckpointOwner != "" || now.Checkpoint != w.from.Checkpoint && !slices.Contains(w.ckpts, now.Checkpoint) {
		return false
	}
	if w.from.Owner == worker {
		return w.from.CheckpointOwner == "" && now.Counter >= w.from.Counter+2
	}
	return w.from.CheckpointOwner == worker && now.Counter >= w.from.Counter+1
}
