package lease

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
// is left out. It copies no lease, and reads nothing: one
// call costs at most max steps per lease held.
func (c *Coordinator) Ancestors(max int) map[string][]string {
	if max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[string][]string
	for shard, h := range c.held {
		parents := c.parentsLocked(shard, h.lease.Parents)
		if len(parents) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string][]string)
		}
		out[shard] = c.ancestorsLocked(shard, parents, max)
	}
	return out
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
