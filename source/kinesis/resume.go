package kinesis

import "github.com/weirstream/weir/batch"

// doneUpTo returns the greatest sequence number of shardID this receiver
// knows needs no reading again, and whether there is one: the greater of
// what the driver's recovery log held at Start (Runtime.ResumeAfter, whose
// blocks the driver recomputes) and what the driver reported completed
// since (BlocksCompleted). A lease lost and taken back, after a worker was
// cut off from the lease table for longer than its lease, starts after it
// rather than after a checkpoint that could not be written meanwhile: the
// records completed since that checkpoint are not delivered again.
func (rn *run) doneUpTo(shardID string) (string, bool) {
	logged, ok := rn.logged(shardID)
	done, dok := rn.r.progress.latestCompleted(shardID)
	switch {
	case !dok:
		return logged, ok
	case !ok || batch.CompareSeq(done, logged) > 0:
		return done, true
	}
	return logged, true
}

// endSeq returns the greatest sequence number of shardID that must be
// completed before the shard, read to its end, is done for good: the
// greater of stored (its greatest stored number, "" if none) and the
// greatest number of the shard in a block the driver's recovery log held
// uncompleted at Start (Runtime.Uncompleted), which the driver completes
// after the restart. A reader resumed after those blocks may reach the end
// of the shard having stored nothing; the shard is not done before they
// are. "" means nothing is to wait for.
func (rn *run) endSeq(shardID, stored string) string {
	if rn.uncompleted == nil {
		return stored
	}
	seq, ok := rn.uncompleted(rn.cfg.Stream, shardID)
	if !ok || !isSeq(seq) {
		return stored
	}
	return batch.MaxSeq(stored, seq)
}

// completedThrough reports whether the records of shardID up to
// endSeq(shardID, stored) are all completed.
func (rn *run) completedThrough(shardID, stored string) bool {
	need := rn.endSeq(shardID, stored)
	if need == "" {
		return true
	}
	done, ok := rn.r.progress.latestCompleted(shardID)
	return ok && batch.CompareSeq(done, need) >= 0
}
