package leasetable

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weirstream/weir/checkpoint"
)

// badItemsLocked remembers the unreadable items of a scan and reports each
// one that is new or whose problem changed: logged at ERROR and queued for
// OnBadItem. c.mu must be held.
func (c *Coordinator) badItemsLocked(bad []*BadItemError) {
	now := make(map[string]string, len(bad))
	for _, b := range bad {
		problem := b.Attr + " " + b.Problem
		now[b.Key] = problem
		if c.bad[b.Key] == problem {
			continue
		}
		c.log.Error("leasetable: lease item cannot be read; its shard is not processed until the item is fixed",
			"table", b.Table, "shard", b.Key, "attribute", b.Attr, "problem", b.Problem, "fix", b.Fix)
		c.queueLocked(leaseEvent{bad: b})
	}
	c.bad = now
}

// BadItems returns how many items of the table the last scan could not
// read as leases (see BadItemError).
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
	c.mu.Lock()
	h := c.held[shard]
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	if err := h.sem.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("leasetable: refuse shard %s: %w", shard, err)
	}
	defer h.sem.Release(1)
	l, ok := c.current(shard, h)
	if !ok {
		return nil
	}
	c.mu.Lock()
	delete(c.held, shard)
	c.refused[shard] = l.Checkpoint
	c.mu.Unlock()
	c.log.Error("leasetable: shard refused; its lease is handed back and not taken again until its checkpoint changes",
		"shard", shard, "checkpoint", l.Checkpoint, "err", why)
	if _, err := c.table.Release(ctx, l); err != nil && !errors.Is(err, checkpoint.ErrLeaseLost) {
		return fmt.Errorf("leasetable: refuse shard %s: %w", shard, err)
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

// learnChildren records the children of each shard of a shard list.
func (c *Coordinator) learnChildren(shards []ShardInfo) {
	children := make(map[string][]string)
	for _, s := range shards {
		for _, p := range s.ParentIDs {
			children[p] = append(children[p], s.ID)
		}
	}
	c.mu.Lock()
	c.children = children
	c.mu.Unlock()
}

// childrenOf returns shard's children as the last shard list knew them.
func (c *Coordinator) childrenOf(shard string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.children[shard])
}
