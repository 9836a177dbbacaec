package leasetable

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/weirstream/weir/checkpoint"

	"golang.org/x/sync/errgroup"
)

// takeCycle scans the table, updates what this worker has observed of every
// lease, and takes the leases takePlan picks.
func (c *Coordinator) takeCycle(ctx context.Context) {
	leases, err := c.table.List(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("leasetable: lease scan failed; retrying next period", "err", err)
		}
		return
	}
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return
	}
	views := c.observeLocked(leases)
	held := make(map[string]bool, len(c.held))
	for shard := range c.held {
		held[shard] = true
	}
	c.mu.Unlock()
	// The takes run at once (bounded): a worker starting on many shards
	// reads them sooner, and each take is a single-item conditional write.
	var g errgroup.Group
	g.SetLimit(renewParallelism)
	for _, l := range takePlan(c.cfg.WorkerID, views, held, c.cfg.MaxStealsPerCycle, c.cfg.MaxLeases) {
		g.Go(func() error { c.take(ctx, l); return nil })
	}
	_ = g.Wait() // the goroutines return nil
}

// observeLocked records the scanned leases and returns them with their
// expiry: a lease is expired when its counter and owner have not changed for
// LeaseDuration on this worker's clock (KCL's rule: no clock is compared
// across workers). A lease first seen now is not expired unless unowned.
func (c *Coordinator) observeLocked(leases []Lease) []leaseView {
	now := c.cfg.Clock.Now()
	seen := make(map[string]seenLease, len(leases))
	views := make([]leaseView, 0, len(leases))
	for _, l := range leases {
		s, ok := c.seen[l.Shard]
		if !ok || s.lease.Counter != l.Counter || s.lease.Owner != l.Owner {
			s.changed = now
		}
		s.lease = l
		seen[l.Shard] = s
		expired := l.Owner != "" && now.Sub(s.changed) >= c.cfg.LeaseDuration
		views = append(views, leaseView{Lease: l, expired: expired})
	}
	c.seen = seen
	return views
}

// take takes l; losing the race to another worker is normal and only logged.
func (c *Coordinator) take(ctx context.Context, l Lease) {
	started := c.cfg.Clock.Now() // the lease is this worker's from when the take was sent, no earlier
	nl, err := c.table.Take(ctx, l, c.cfg.WorkerID)
	switch {
	case errors.Is(err, checkpoint.ErrLeaseLost):
		c.log.Debug("leasetable: another worker took the lease first", "shard", l.Shard)
		return
	case err != nil:
		if ctx.Err() == nil {
			c.log.Warn("leasetable: taking a lease failed", "shard", l.Shard, "err", err)
		}
		return
	}
	h := &heldLease{sem: semaphore.NewWeighted(1), lease: nl, renewed: started}
	c.mu.Lock()
	if c.draining { // Drain began during the take: hand it back at once
		c.mu.Unlock()
		if _, err := c.table.Release(ctx, nl); err != nil {
			c.log.Warn("leasetable: releasing a lease taken while draining failed", "shard", l.Shard, "err", err)
		}
		return
	}
	c.held[l.Shard] = h
	c.queueLocked(leaseEvent{acquired: &nl})
	c.mu.Unlock()
	verb := "took"
	if l.Owner != "" && l.Owner != c.cfg.WorkerID {
		verb = "took over"
	}
	c.log.Info("leasetable: "+verb+" lease", "shard", l.Shard, "from", l.Owner, "checkpoint", nl.Checkpoint)
}

// syncListed calls ListShards and SyncShards, logging failures.
func (c *Coordinator) syncListed(ctx context.Context) {
	shards, err := c.cfg.ListShards(ctx)
	if err == nil {
		err = c.SyncShards(ctx, shards)
	}
	if err != nil && ctx.Err() == nil {
		c.log.Warn("leasetable: shard sync failed; retrying next period", "err", err)
	}
}

// SyncShards creates a lease, unowned, for every shard of shards that has
// none. A shard with a parent among shards or in the table starts at
// checkpoint.TrimHorizon, so that nothing written to it while its parent was read is
// skipped; any other starts at InitialPosition. Leases of shards not listed
// are left alone. It is safe to call from several workers at once.
func (c *Coordinator) SyncShards(ctx context.Context, shards []ShardInfo) error {
	leases, err := c.table.List(ctx)
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(leases)+len(shards))
	for _, l := range leases {
		known[l.Shard] = true
	}
	exists := make(map[string]bool, len(known))
	for k := range known {
		exists[k] = true
	}
	for _, s := range shards {
		known[s.ID] = true
	}
	var (
		g    errgroup.Group
		mu   sync.Mutex
		errs []error
	)
	g.SetLimit(renewParallelism) // each create is one conditional PutItem
	for _, s := range shards {
		if exists[s.ID] {
			continue
		}
		l := Lease{Shard: s.ID, Checkpoint: c.cfg.InitialPosition, Parents: s.ParentIDs}
		for _, p := range s.ParentIDs {
			if known[p] {
				l.Checkpoint = checkpoint.TrimHorizon
			}
		}
		g.Go(func() error {
			created, err := c.table.Create(ctx, l)
			switch {
			case err != nil:
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			case created:
				c.log.Info("leasetable: lease created", "shard", s.ID, "checkpoint", l.Checkpoint, "parents", s.ParentIDs)
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
