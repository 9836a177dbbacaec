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
