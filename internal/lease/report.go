package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
)

// badItemsLocked remembers the unreadable items of a scan and reports each
// one that is new or whose problem changed (badItemLocked). c.mu must be
// held.
func (c *Coordinator) badItemsLocked(bad []*leasetable.BadItemError) {
	was := c.bad
	c.bad = make(map[string]string, len(bad))
	for _, b := range bad {
		if p, ok := was[b.Key]; ok {
			c.bad[b.Key] = p
		}
		c.badItemLocked(b)
	}
}

// badItemLocked remembers an unreadable item and reports it, if it is new or
// its problem changed: logged at ERROR, with the leaseKey and the fix as
// attributes, and queued for OnBadItem. Until it reads as a lease again,
// every take cycle looks at it (recheckBad). c.mu must be held.
func (c *Coordinator) badItemLocked(b *leasetable.BadItemError) {
	problem := b.Attr + " " + b.Problem
	if c.bad[b.Key] == problem {
		return
	}
	c.bad[b.Key] = problem
	c.log.Error("leasetable: lease item cannot be read; its shard is not processed until the item is fixed",
		"table", b.Table, "leaseKey", b.Key, "attribute", b.Attr, "problem", b.Problem, "fix", b.Fix)
	c.queueLocked(leaseEvent{bad: b})
}

// recheckBad reads each item the last scan or write found unreadable,
// eventually consistently, and reports whether a scan is needed now: one
// was repaired, deleted, or has another problem (the scan reports it), so a
// repaired lease is taken within a take cycle rather than at the next
// ScanInterval. A read that fails leaves the item to the next cycle.
func (c *Coordinator) recheckBad(ctx context.Context) bool {
	c.mu.Lock()
	keys := slices.Sorted(maps.Keys(c.bad))
	problems := maps.Clone(c.bad)
	c.mu.Unlock()
	for _, k := range keys {
		_, _, err := c.table.peek(ctx, k)
		var b *leasetable.BadItemError
		switch {
		case errors.As(err, &b):
			if b.Attr+" "+b.Problem != problems[k] {
				return true
			}
		case err != nil:
			if ctx.Err() == nil {
				c.log.Warn("leasetable: reading an unreadable lease item again failed; retrying next period", "leaseKey", k, "err", err)
			}
		default: // readable, or gone
			return true
		}
	}
	return false
}

// checkWrittenItem reports shard's item as unreadable when err, from a
// write of its lease, shows it so, or when the write's condition failed
// and the item, read again (gerr: the error of whyRefused's read), is unreadable (an
// edited leaseCounter or leaseOwner fails every condition): the edit is
// reported at the write that met it, not only at the next scan.
func (c *Coordinator) checkWrittenItem(err, gerr error) {
	var b *leasetable.BadItemError
	if !errors.As(err, &b) && (!errors.Is(err, checkpointer.ErrLeaseLost) || !errors.As(gerr, &b)) {
		return
	}
	c.mu.Lock()
	c.badItemLocked(b)
	c.mu.Unlock()
}

// BadItems returns how many items of the table the last scan could not
// read as leases (see leasetable.BadItemError).
func (c *Coordinator) BadItems() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bad)
}

// Refuse hands back the lease of a shard this worker holds but cannot
// process (its checkpoint names no record of the shard, say): it releases
// the lease, conditional on the counter, and takes it no more while its
// checkpoint stays the one refused; once the checkpoint is changed (fixed),
// the lease may be taken again. No OnLost is reported. why is logged.
// Refusing a shard not held does nothing.
func (c *Coordinator) Refuse(ctx context.Context, shard string, why error) error {
	return c.letGo(ctx, shard, "refuse", nil,
		func(l Lease) { c.refused[shard] = l.Checkpoint },
		func(l Lease) error {
			c.log.Error("leasetable: shard refused; its lease is handed back and not taken again until its checkpoint changes",
				"shard", shard, "checkpoint", l.Checkpoint, "err", why)
			if _, err := c.table.Release(ctx, l); err != nil && !errors.Is(err, checkpointer.ErrLeaseLost) {
				return err
			}
			return nil
		})
}

// letGo stops holding shard's lease, if held (and want, if not nil, says
// so of it), after a write of it in flight: drop runs under c.mu as the
// lease leaves c.held, write after, the lease's writes still serialized.
// op names the operation in the errors.
func (c *Coordinator) letGo(ctx context.Context, shard, op string, want func(*heldLease) bool, drop func(Lease), write func(Lease) error) error {
	c.mu.Lock()
	h := c.held[shard]
	c.mu.Unlock()
	if h == nil || want != nil && !want(h) {
		return nil
	}
	if err := h.sem.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("leasetable: %s shard %s: %w", op, shard, err)
	}
	defer h.sem.Release(1)
	l, ok := c.current(shard, h)
	if !ok {
		return nil
	}
	c.mu.Lock()
	delete(c.held, shard)
	c.givenLocked(shard)
	if drop != nil {
		drop(l)
	}
	c.mu.Unlock()
	if err := write(l); err != nil {
		return fmt.Errorf("leasetable: %s shard %s: %w", op, shard, err)
	}
	return nil
}

// withoutRefusedLocked leaves out of views the leases refused at their
// current checkpoint, and forgets the refusals whose checkpoint changed.
// c.mu must be held.
func (c *Coordinator) withoutRefusedLocked(views []leaseView) []leaseView {
	if len(c.refused) == 0 {
		return views
	}
	return slices.DeleteFunc(views, func(v leaseView) bool {
		ck, ok := c.refused[v.Shard]
		if ok && ck != v.Checkpoint {
			delete(c.refused, v.Shard)
			return false
		}
		return ok
	})
}

// learnChildren records the children and the parents of each shard of a
// shard list.
func (c *Coordinator) learnChildren(shards []ShardInfo) {
	children := make(map[string][]string)
	parents := make(map[string][]string)
	listed := make(map[string]bool, len(shards))
	for _, s := range shards {
		listed[s.ID] = true
		if len(s.ParentIDs) > 0 {
			parents[s.ID] = s.ParentIDs
		}
		for _, p := range s.ParentIDs {
			children[p] = append(children[p], s.ID)
		}
	}
	c.mu.Lock()
	c.children, c.parents, c.listed = children, parents, listed
	c.treeChangedLocked()
	c.forgetUnlistedLocked(shards)
	c.mu.Unlock()
}

// childrenOf returns shard's children as the last shard list knew them.
func (c *Coordinator) childrenOf(shard string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.children[shard])
}
