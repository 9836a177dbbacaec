package recoverylog_test

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
)

// A driver logs blocks and batches as they happen; after a restart it loads
// the state and recomputes what was not completed.
func Example() {
	ctx := context.Background()
	store := recoverylog.NewMemory() // recovery.Dir("ckpt") in production
	shape := recovery.Shape{
		Sources: []recovery.Component{{Kind: "kinesis", Name: "words"}},
		Outputs: []recovery.Component{{Kind: "Print"}},
	}

	log, err := recoverylog.Open(ctx, store, nil)
	if err != nil {
		panic(err)
	}
	b0 := batch.BlockInfo{ID: batch.BlockID{Source: 0, Seq: 0}, Count: 2, Ranges: []batch.SeqRange{
		{Stream: "words", Shard: "shardId-000000000000", First: "100", Last: "200", Count: 2}}}
	b1 := batch.BlockInfo{ID: batch.BlockID{Source: 0, Seq: 1}, Count: 1, Ranges: []batch.SeqRange{
		{Stream: "words", Shard: "shardId-000000000000", First: "300", Last: "300", Count: 1}}}
	err = log.Append(ctx,
		recoverylog.ShapeRecorded(shape),
		recoverylog.BlockStored(b0),
		recoverylog.BatchAllocated(1000, b0.ID),
		recoverylog.BlockStored(b1),
	)
	if err != nil {
		panic(err)
	}
	log.Close() // as if the process died here

	log, err = recoverylog.Open(ctx, store, nil)
	if err != nil {
		panic(err)
	}
	defer log.Close()
	st, err := recoverylog.Load(ctx, log)
	if err != nil {
		panic(err)
	}
	if err := recoverylog.CheckShape(*st.Shape, shape); err != nil {
		panic(err)
	}
	for _, p := range st.Pending {
		fmt.Println("recompute batch", int64(p.Time), "from", p.IDs())
	}
	fmt.Println("next batch gets", len(st.Unallocated), "stored block(s)")
	fmt.Println("source 0 numbers blocks from", st.NextBlockSeq[0])
	fmt.Println("shard resumes after", st.ShardSeqs[recoverylog.ShardKey{Stream: "words", Shard: "shardId-000000000000"}])
	// Output:
	// recompute batch 1000 from [block-0-0]
	// next batch gets 1 stored block(s)
	// source 0 numbers blocks from 2
	// shard resumes after 300
}

// CheckShape refuses a restart with a different pipeline.
func ExampleCheckShape() {
	was := recovery.Shape{Outputs: []recovery.Component{{Kind: "Print"}, {Kind: "ForEachBatch", Name: "files"}}}
	now := recovery.Shape{Outputs: []recovery.Component{{Kind: "Print"}, {Kind: "Print"}}}
	fmt.Println(recoverylog.CheckShape(was, now))
	// Output:
	// recovery: pipeline shape changed since the recovery log was written: output 2 was ForEachBatch("files"), now Print; a log can only be replayed by a pipeline with the same sources and outputs in the same order: restore the pipeline, or start fresh by deleting the log (its directory, or use a new DynamoDB log name), accepting that its pending batches will not be recomputed
}
