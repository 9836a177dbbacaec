package lease

import "slices"

// Ancestors returns, by shard ID, the ancestors of the shards whose leases
// this worker holds: each shard's parents, then their parents, and so on,
// breadth first (nearest first), each once, at most max of a shard (max <=
// 0: none). A shard's parents are those the last shard list (SyncShards)
// gives it, else, for a shard it does not list, those its lease names (the
// held lease, or one in the last scan): the shard list names every shard
// within the stream's retention, closed ones too, with their parents,
// whereas a finished shard's lease is deleted once its children's have
// begun, and a lease left from a stream deleted and created again with
// the same name names the old stream's parents, which would fence the new
// stream's writes of a shard that is no ancestor. A shard without parents
// is left out. It copies no lease, and reads nothing. A shard's walk is
// kept until the tree changes (treeChangedLocked) or its lease is taken
// again, so a call costs a copy of the ancestors of each lease held, and
// at most max steps per lease taken or walk forgotten since the last
// call. The slices it returns are the caller's.
func (c *Coordinator) Ancestors(max int) map[string][]string {
	if max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ancestry == nil || c.ancestryMax != max {
		c.ancestry, c.ancestryMax = make(map[string][]string, len(c.held)), max
	}
	shards, total := 0, 0
	for shard, h := range c.held {
		as, ok := c.ancestry[shard]
		if !ok {
			if parents := c.parentsLocked(shard, h.lease.Parents); len(parents) > 0 {
				as = c.ancestorsLocked(shard, parents, max)
			}
			c.ancestry[shard] = as
		}
		if len(as) > 0 {
			shards, total = shards+1, total+len(as)
		}
	}
	if shards == 0 {
		return nil
	}
	// One array for every copy, each slice capped at its end: a caller's
	// append to one cannot write over the next, nor anything write over
	// the walks kept.
	out := make(map[string][]string, shards)
	all := make([]string, 0, total)
	for shard := range c.held {
		if as := c.ancestry[shard]; len(as) > 0 {
			all = append(all, as...)
			out[shard] = all[len(all)-len(as) : len(all) : len(all)]
		}
	}
	return out
}

// treeChangedLocked forgets every walk Ancestors kept: the shard list, or
// the parents a lease of the last scan names, changed. c.mu must be held.
func (c *Coordinator) treeChangedLocked() {
	c.ancestry = nil
}

// forgetWalkLocked forgets the walk Ancestors kept of shard: its lease
// is taken, or names other parents, where the walk starts when the shard
// list does not name the shard. c.mu must be held.
func (c *Coordinator) forgetWalkLocked(shard string) {
	delete(c.ancestry, shard)
}

// setHeldLeaseLocked sets h's lease to l, as a later write or scan of it
// gives it, forgetting the walk Ancestors kept of its shard if l names
// other parents. c.mu must be held.
func (c *Coordinator) setHeldLeaseLocked(h *heldLease, l Lease) {
	if !slices.Equal(h.lease.Parents, l.Parents) {
		c.forgetWalkLocked(l.Shard)
	}
	h.lease = l
}

// ancestorsLocked returns the ancestors of shard, whose parents are
// parents, breadth first, each once, at most max (see Ancestors). A cycle
// in a broken shard list ends where it comes back. c.mu must be held.
func (c *Coordinator) ancestorsLocked(shard string, parents []string, max int) []string {
	seen := map[string]bool{shard: true}
	var out []string
	next := parents
	for i := 0; ; i++ {
		for _, p := range next {
			if seen[p] {
				continue
			}
			if len(out) == max {
				return out
			}
			seen[p] = true
			out = append(out, p)
		}
		if i == len(out) {
			return out
		}
		next = c.parentsLocked(out[i], c.seen[out[i]].lease.Parents)
	}
}

// parentsLocked returns the parents of shard: those the last shard list
// gives it if it lists shard (none for a shard it lists without), else
// leased, those its lease names. c.mu must be held.
func (c *Coordinator) parentsLocked(shard string, leased []string) []string {
	if c.listed[shard] {
		return c.parents[shard]
	}
	return leased
}
