package lease

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/internal/checkpointer"
)

// finishedLeases returns the leases of views that are done with and may be
// deleted, by the rules of the KCL's LeaseCleanupManager for a completed
// shard: the lease is at checkpointer.ShardEnd, it has children (its
// childShardIds, the leases naming it a parent, or listed, from the last
// shard list), every child has a lease whose processing has begun (its
// checkpoint is a sequence number or checkpointer.ShardEnd, not a start
// position), and no lease of its own parents is left, so leases go from
// the oldest ancestor down. listed maps a shard to its children as the
// shard list knows them.
func finishedLeases(views []leaseView, listed map[string][]string) []Lease {
	byShard := make(map[string]Lease, len(views))
	children := make(map[string][]string)
	for _, v := range views {
		byShard[v.Shard] = v.Lease
		for _, p := range v.Parents {
			children[p] = append(children[p], v.Shard)
		}
	}
	var out []Lease
	for _, v := range views {
		if v.Checkpoint != checkpointer.ShardEnd {
			continue
		}
		kids := slices.Concat(v.Children, children[v.Shard], listed[v.Shard])
		begun := len(kids) > 0
		for _, k := range kids {
			kl, ok := byShard[k]
			if !ok || !hasBegun(kl) {
				begun = false
				break
			}
		}
		for _, p := range v.Parents {
			if _, ok := byShard[p]; ok {
				begun = false
			}
		}
		if begun {
			out = append(out, v.Lease)
		}
	}
	return out
}

// isSeq reports whether a checkpoint is a sequence number (not a sentinel).
func isSeq(ckpt string) bool {
	return ckpt != checkpointer.ShardEnd && validCheckpoint(ckpt) &&
		ckpt != checkpointer.TrimHorizon && ckpt != checkpointer.LatestPosition && ckpt != checkpointer.AtTimestamp
}

// deleteFinished deletes the leases of finished shards (finishedLeases),
// each conditional on being still at checkpointer.ShardEnd with the counter
// scanned, so the table, its scans and the beat board's choices do not
// grow with every reshard. Best effort: a lease not deleted now is
// looked at again by the next scan.
func (c *Coordinator) deleteFinished(ctx context.Context, done []Lease) {
	for _, l := range done {
		deleted, err := c.table.deleteFinished(ctx, l)
		switch {
		case deleted:
			c.log.Info("leasetable: lease of a finished shard deleted; its children's leases have begun", "shard", l.Shard)
		case err != nil && ctx.Err() == nil:
			c.log.Warn("leasetable: deleting a finished shard's lease failed; retrying at the next scan", "shard", l.Shard, "err", err)
		}
	}
}

// deleteFinished deletes l if it is still at checkpointer.ShardEnd with
// l.Counter, and reports whether it did.
func (t *Table) deleteFinished(ctx context.Context, l Lease) (bool, error) {
	_, err := t.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:           &t.name,
		Key:                 keyOf(l.Shard),
		ConditionExpression: aws.String("#counter = :counter AND #ckpt = :end"),
		ExpressionAttributeNames: map[string]string{
			"#counter": attrCounter, "#ckpt": attrCheckpoint,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":counter": num(l.Counter), ":end": str(checkpointer.ShardEnd),
		},
	}, t.opts...)
	return applied(err, "delete finished shard "+l.Shard)
}

// knowLocked records l's checkpoint as the last this worker knows of its
// shard, if it is a position in the shard (a sequence number or
// checkpointer.ShardEnd): a lease item deleted later is created again there
// (SyncShards) rather than at the initial position. c.mu must be held.
func (c *Coordinator) knowLocked(l Lease) {
	switch {
	case isSeq(l.Checkpoint) || l.Checkpoint == checkpointer.ShardEnd:
		c.known[l.Shard] = l.Checkpoint
	case l.Checkpoint != "":
		delete(c.known, l.Shard) // reset by hand to a start position: it says where to start
	}
}

// forgetUnlistedLocked forgets the known checkpoints of shards neither in
// shards nor parents of one: they will never be created again. c.mu must
// be held.
func (c *Coordinator) forgetUnlistedLocked(shards []ShardInfo) {
	keep := make(map[string]bool, len(shards))
	for _, s := range shards {
		keep[s.ID] = true
		for _, p := range s.ParentIDs {
			keep[p] = true
		}
	}
	for k := range c.known {
		if !keep[k] {
			delete(c.known, k)
		}
	}
}

// leasedDescendants returns the shards of shards with a descendant (among
// shards) whose lease has begun (begun: a sequence number or SHARD_END, see
// hasBegun): such a shard was read to its end, since a child is read only
// after its parents ended, and its lease deleted (finishedLeases), so it
// never gets a lease again, as the KCL's shard sync creates none for a
// closed shard whose descendants are processed. A descendant's lease that
// merely exists proves nothing: the shard sync creates the children's
// leases while their parent is still read, and a parent whose lease was
// deleted then must get one again, or its last records are never read.
func leasedDescendants(shards []ShardInfo, begun map[string]bool) map[string]bool {
	parents := make(map[string][]string, len(shards))
	for _, s := range shards {
		parents[s.ID] = s.ParentIDs
	}
	out := make(map[string]bool)
	var mark func(id string, depth int)
	mark = func(id string, depth int) {
		if depth > len(shards) { // a cycle in a broken list: stop
			return
		}
		for _, p := range parents[id] {
			if !out[p] {
				out[p] = true
				mark(p, depth+1)
			}
		}
	}
	for _, s := range shards {
		if begun[s.ID] {
			mark(s.ID, 0)
		}
	}
	return out
}

// hasBegun reports whether l's shard is being or was processed: its
// checkpoint is a sequence number or checkpointer.ShardEnd, not a start
// position.
func hasBegun(l Lease) bool {
	return isSeq(l.Checkpoint) || l.Checkpoint == checkpointer.ShardEnd
}

// startOf returns where a new lease of s starts: the checkpoint this worker
// knows of it (its item was deleted: never skip what was not processed);
// checkpointer.TrimHorizon when a parent has a lease, is listed, or is known
// to this worker (its records were read, so the child's are all new), or
// when s is closed and its lease was deleted before it ended (closed: a
// child's lease exists): a closed shard has nothing after LATEST, so a
// lease of it created again at LATEST would skip its last records; else
// initial (a new application at LATEST reads no closed parent's history).
func startOf(s ShardInfo, exists map[string]bool, known map[string]string, initial string, closed bool) string {
	if ck, ok := known[s.ID]; ok {
		return ck
	}
	if closed {
		return checkpointer.TrimHorizon
	}
	for _, p := range s.ParentIDs {
		if _, ok := known[p]; ok || exists[p] {
			return checkpointer.TrimHorizon
		}
	}
	return initial
}
