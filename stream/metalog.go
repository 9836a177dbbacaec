package stream

import (
	"context"

	"github.com/weirstream/weir/batch"
)

// metaLog is where the driver records its progress so that a restarted
// driver can recompute exactly the same batches (DESIGN.md, Recovery). The
// recovery package's logs plug in here; until then the driver uses noLog.
//
// Each method returns only once the record is durable; an error is fatal to
// the pipeline, because continuing would break the guarantees.
type metaLog interface {
	// blockStored records a block before the push that stored it returns, so
	// a receiver may treat the block's sequence numbers as stored.
	blockStored(ctx context.Context, info batch.BlockInfo) error
	// batchAllocated records the blocks of a batch before any output runs.
	batchAllocated(ctx context.Context, t batch.Time, blocks []batch.BlockInfo) error
	// batchCompleted records that every output of batch t succeeded, before
	// receivers are told their blocks are completed.
	batchCompleted(ctx context.Context, t batch.Time) error
}

// noLog is the metaLog of a driver without a recovery log: it records
// nothing.
type noLog struct{}

func (noLog) blockStored(context.Context, batch.BlockInfo) error { return nil }

func (noLog) batchAllocated(context.Context, batch.Time, []batch.BlockInfo) error { return nil }

func (noLog) batchCompleted(context.Context, batch.Time) error { return nil }
