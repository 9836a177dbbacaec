package kinesis

import (
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
)

// errNotInStream marks the error of a reader that could not start after
// the position the driver's recovery log holds for its shard, because
// Kinesis refuses it: the log describes another stream.
var errNotInStream = errors.New("the recovery log's position is not in the stream")

// notInStream returns err, the error of a reader's first call at pos, as
// an error wrapping errNotInStream that says what happened and names the
// fix, when Kinesis refused pos (an InvalidArgumentException: Kinesis
// answers so for a sequence number that "did not come from this stream")
// and pos starts after the sequence number the driver's recovery log holds
// for the shard. A stream deleted and created again with the same name has
// the same shard IDs and new sequence numbers, so a recovery log kept from
// the old one names positions the new one does not have; no retry and no
// checkpoint change helps, and going on would read nothing from the shard
// forever. Other errors are returned as they are.
func (rn *run) notInStream(shardID string, pos position, err error) error {
	var invalid *types.InvalidArgumentException
	logged, ok := rn.logged(shardID)
	if !ok || pos.After != logged || !errors.As(err, &invalid) {
		return err
	}
	return fmt.Errorf("%w: stream %s refuses sequence number %s of shard %s, the last one the driver's recovery log (stream.Config.Recovery) holds for it: "+
		"the log was written for an earlier stream of the same name (deleted and created again) or for another stream, and no record it describes is in this one; "+
		"fix: start with a new recovery log (move the directory of recovery.Dir away, or give the DynamoDB log a new Name): %w",
		errNotInStream, rn.cfg.Stream, logged, shardID, err)
}

// doneUpTo returns the greatest sequence number of shardID this receiver
// knows needs no reading again, and whether there is one: the greater of
// what the driver's recovery log held at Start (Runtime.ResumeAfter, whose
// blocks the driver recomputes) and what this run added to blocks
// (progress.lastAdded). Records added to a block reach a batch of this
// process: the block generator seals and pushes every block, and a push
// that fails for good fails the Run (a restart then reads them again from
// its log or the checkpoint). A lease lost and taken back, after a worker
// was cut off from the lease table for longer than its lease, starts after
// them rather than after a checkpoint that could not be written meanwhile:
// the records this worker read since that checkpoint, completed or still on
// their way (a DynamoDB recovery log stalled by the same outage holds them
// back), are not delivered again; unless the lease is taken back more than
// forgetShardAfter after it was lost, when the shard is forgotten.
func (rn *run) doneUpTo(shardID string) (string, bool) {
	logged, ok := rn.logged(shardID)
	added, aok := rn.r.progress.latestAdded(shardID)
	switch {
	case !aok:
		return logged, ok
	case !ok || batch.CompareSeq(added, logged) > 0:
		return added, true
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
// endSeq(shardID, stored) are all completed: those stored (progress) and
// those the recovery log held uncompleted at Start, whose completion is
// kept apart (recoveredShards) since it must outlive the shard's progress,
// forgotten forgetShardAfter after this worker stopped reading it: the
// driver may complete them while another worker holds the lease, and this
// one take it back and read the shard to its end later.
func (rn *run) completedThrough(shardID, stored string) bool {
	done, ok := rn.r.progress.latestCompleted(shardID)
	if stored != "" && (!ok || batch.CompareSeq(done, stored) < 0) {
		return false
	}
	need := rn.endSeq(shardID, "")
	return need == "" || ok && batch.CompareSeq(done, need) >= 0 || rn.r.recovered.has(shardID)
}

// recoveredShards records the shards whose blocks the driver's recovery
// log held uncompleted at Start (source.Runtime.Uncompleted) are all
// completed. It holds at most one entry per shard the log knew at Start,
// and is safe for concurrent use.
type recoveredShards struct {
	mu   sync.Mutex
	done map[string]bool
}

// completed marks each shard of ranges whose Last reaches the greatest
// sequence number uncompleted names for it in stream. uncompleted nil
// (no recovery log) marks nothing.
func (s *recoveredShards) completed(uncompleted func(stream, shard string) (string, bool), stream string, ranges []batch.SeqRange) {
	if uncompleted == nil {
		return
	}
	for _, r := range ranges {
		seq, ok := uncompleted(stream, r.Shard)
		if !ok || !isSeq(seq) || batch.CompareSeq(r.Last, seq) < 0 {
			continue
		}
		s.mu.Lock()
		if s.done == nil {
			s.done = make(map[string]bool)
		}
		s.done[r.Shard] = true
		s.mu.Unlock()
	}
}

// has reports whether the recovered blocks of shard are all completed.
func (s *recoveredShards) has(shard string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[shard]
}
