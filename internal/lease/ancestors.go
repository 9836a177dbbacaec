package lease

// Ancestors returns, by shard ID, the ancestors of the shards whose leases
// this worker holds: each shard's parents as its lease names them, then
// their parents, and so on, breadth first (nearest first), each once, at
// most max of a shard (max <= 0: none). A parent's parents are those the
// last shard list (SyncShards) gives it, else those its lease names in the
// last scan: the shard list names every shard within the stream's
// retention, closed ones too, with their parents, whereas a finished
// shard's lease is deleted once its children's have begun. A shard
// without parents is left out. It copies no lease, and reads nothing: one
// call costs at most max steps per lease held.
func (c *Coordinator) Ancestors(max int) map[string][]string {
	if max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[string][]string
	for shard, h := range c.held {
		if len(h.lease.Parents) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string][]string)
		}
		out[shard] = c.ancestorsLocked(shard, h.lease.Parents, max)
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
		if next = c.parents[out[i]]; next == nil {
			next = c.seen[out[i]].lease.Parents
		}
	}
}
