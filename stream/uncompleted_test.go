package stream

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
)

// TestUncompletedSeqs checks source.Runtime.Uncompleted's answers: per
// shard, the greatest sequence number of the pending batches' blocks and
// the unallocated blocks, compared as numbers; nothing of the batches
// completed before.
func TestUncompletedSeqs(t *testing.T) {
	block := func(seq uint64, ranges ...batch.SeqRange) batch.BlockInfo {
		return batch.BlockInfo{ID: batch.BlockID{Seq: seq}, Ranges: ranges}
	}
	rng := func(shard, first, last string) batch.SeqRange {
		return batch.SeqRange{Stream: "s", Shard: shard, First: first, Last: last, Count: 1}
	}
	st := &recoverylog.State{
		Progress: recoverylog.Progress{ShardSeqs: map[recoverylog.ShardKey]string{
			{Stream: "s", Shard: "done"}: "500", // completed: not uncompleted
		}},
		Pending: []recoverylog.PendingBatch{
			{Blocks: []batch.BlockInfo{block(1, rng("a", "90", "99"), rng("b", "5", "7"))}},
			{Blocks: []batch.BlockInfo{block(2, rng("a", "100", "100"))}},
		},
		Unallocated: []batch.BlockInfo{block(3, rng("b", "8", "9"), rng("c", "1", "1"))},
	}
	want := map[recoverylog.ShardKey]string{
		{Stream: "s", Shard: "a"}: "100",
		{Stream: "s", Shard: "b"}: "9",
		{Stream: "s", Shard: "c"}: "1",
	}
	if diff := cmp.Diff(want, uncompletedSeqs(st)); diff != "" {
		t.Errorf("uncompletedSeqs (-want +got):\n%s", diff)
	}
}
