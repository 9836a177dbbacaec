package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
)

// ErrStopped is returned by calls made on a receiver or generator after it
// has stopped.
var ErrStopped = errors.New("source: stopped")

// Block is a sealed block on its way to the store: its records, and the
// sequence ranges they were read from, in the order they were added.
type Block[T any] struct {
	Ranges  []batch.SeqRange
	Records []T
}

// Positioned is implemented by a record type (through its value or its
// pointer) whose records know their position in the shard they were read
// from, as weir's Kinesis receiver's Record does. The driver then tells a
// ForEachBatch output declared with stream.Origins each record's
// batch.Origin, which sink/kinesis writes as an origin tag.
type Positioned interface {
	// Position returns the record's sequence number in its shard and its
	// sub-sequence number in a KPL aggregate (0 for a plain record).
	Position() (seq string, subSeq int64)
}

// PushFunc stores a sealed block. It returns only once the block's records are
// in the block store and its BlockInfo is in the recovery log (when one is
// configured); the returned BlockInfo carries the ID the driver assigned, and
// its Ranges and Count are those of b. Only
// after it returns without error may a receiver treat the block's sequence
// numbers as stored. It is safe for concurrent use.
type PushFunc[T any] func(ctx context.Context, b Block[T]) (batch.BlockInfo, error)

// Runtime is what the driver gives a receiver when it starts it.
type Runtime[T any] struct {
	// Source is the index of this source in the pipeline (declaration order).
	Source int
	// Push stores a sealed block; see PushFunc. Blocks are given IDs in the
	// order Push is called and enter batches in the order Push returns, so
	// a receiver that pushes concurrently has no order between those blocks;
	// the BlockGenerator pushes one block at a time, keeping each shard's
	// records in order across blocks.
	Push PushFunc[T]
	// BlockInterval is how often a receiver's BlockGenerator seals a block.
	BlockInterval time.Duration
	// BatchInterval is the driver's batch interval: how often it cuts a
	// batch from the stored blocks. Receivers use it as the default of
	// their time-based settings, such as a checkpoint interval, so that
	// they follow the pace of the pipeline. Zero means the driver does not
	// say (WithDefaults leaves it zero); each receiver then documents its
	// own fallback.
	BatchInterval time.Duration
	// MaxBufferedBytes is the memory, in bytes, this receiver's records
	// may hold from when they are read until the driver reports their
	// block completed (CompletionObserver): the receiver's share of the
	// pipeline's budget (stream.Config.MaxBufferedBytes; DESIGN.md,
	// "Memory and flow control"). A receiver that can measure its records,
	// as weir's Kinesis receiver does, pauses reading while they hold this
	// much, and still reads one page when it holds nothing, however large
	// the page: it never drops a record. -1 means no limit, and is what a
	// driver that does not report completions must pass; 0 means
	// DefaultMaxBufferedBytes.
	MaxBufferedBytes int64
	// Clock is the time source for sealing and back-off.
	Clock clock.Clock
	// Logger receives the receiver's logs; never nil.
	Logger *slog.Logger
	// ReportError tells the driver's listeners about an error the receiver
	// recovered from (a retry, a skipped range). Fatal errors are returned by
	// Start instead. Never nil.
	ReportError func(err error)
	// ResumeAfter returns, for a shard of a stream, the greatest sequence
	// number of any block the driver's recovery log holds (ok false if the
	// log knows none for that shard). A restarted receiver reads each shard
	// after max(ResumeAfter, its checkpoint): the records up to it are in
	// logged blocks, which the driver recomputes from their ranges, so
	// reading them again would only duplicate them. The answers are fixed
	// when Start is called and safe for concurrent use. Nil (no recovery
	// log, or a driver that does not set it) means none is known, as does
	// ok false.
	ResumeAfter func(stream, shard string) (seq string, ok bool)
	// LoggedUntil is, on a restart, about when the previous Run was last
	// seen alive, as the driver's recovery log shows when Start is called:
	// the time of the newest batch it logged (for batch times an idle
	// pipeline reserved ahead, the time it reserved them). Zero on a first
	// start, or without a log. A receiver that would start a partition it
	// knows no position of at "now" (Kinesis's LATEST) starts there
	// instead, less a margin, so that what was added while the pipeline was
	// down is not skipped: a partition with no position in the log
	// delivered nothing before, so nothing is read twice.
	LoggedUntil time.Time
	// Uncompleted returns, for a shard of a stream, the greatest sequence
	// number of any block the driver's recovery log holds that was not in a
	// completed batch when Start was called: the blocks of the batches
	// allocated but not completed, and those stored but not allocated (ok
	// false if none). The driver completes them after Start, reporting them
	// to the receiver's CompletionObserver like any other. A receiver that declares a
	// shard done for good (a Kinesis shard end, which lets other workers
	// read its children) waits until records up to it are completed, not
	// only those it stored itself: a shard can be resumed past its end. The
	// answers are fixed when Start is called and safe for concurrent use.
	// Nil means none.
	Uncompleted func(stream, shard string) (seq string, ok bool)
	// ShardFinished tells the driver that a shard is finished for good:
	// read to its end, every record of it in a completed batch, and its end
	// recorded where a restarted receiver finds it (a SHARD_END checkpoint
	// in the lease table; without one, Kinesis no longer listing the shard,
	// or a child of it holding a position in the log), so that no reader
	// starts on it again. The
	// driver's recovery log then forgets the shard (ResumeAfter no longer
	// knows it after a restart), so the log does not grow with every shard
	// a resharded stream ever had. A receiver sharing a stream with other
	// workers calls it too for a shard another worker finished, once the
	// records of it this one holds are completed. It returns once that is
	// logged; an error means the Run is failing. Safe for concurrent use.
	// Nil when the driver keeps no log.
	ShardFinished func(ctx context.Context, stream, shard string) error
	// ShardState, when not nil, is the driver's state kept per shard of
	// this receiver's records (see ShardState): a ShardSharer whose
	// SharesShards is true is given one when the pipeline's stateful
	// operators on its records keep their state by shard. Nil: the driver
	// keeps no state per shard of this source.
	ShardState ShardState
	// Observe registers hook, a CompletionObserver, a BatchObserver or
	// both, with the driver, which then reports to it as to a receiver
	// that is one itself: a receiver keeps its hooks off its own method
	// set this way. Call it from Start before the first Push; the blocks
	// the driver completed before (those of batches recovered from its
	// log) are reported to hook within the call. The driver never calls
	// hooks concurrently; a hook must not call Observe. WithDefaults sets
	// a function that ignores hook (a driver that reports nothing).
	Observe func(hook any)
}

// Receiver is a source of records of type T.
//
// The driver calls Start once, in its own goroutine; Start runs until Stop is
// called or ctx is done. Stop is graceful: the receiver stops reading, seals
// and pushes what it holds, and Start returns nil. Cancelling ctx stops at
// once: unpushed records are dropped, which is safe because nothing unpushed
// was ever reported as stored, so it is read again after a restart.
type Receiver[T any] interface {
	// Start receives records and pushes them in blocks through rt.Push until
	// Stop is called (then it returns nil) or ctx is done (then it returns
	// ctx.Err()). Any other returned error is fatal to the pipeline.
	Start(ctx context.Context, rt Runtime[T]) error
	// Stop asks a running receiver to stop after pushing what it holds, and
	// waits for Start to return or ctx to be done. It is safe to call more
	// than once and before or after Start.
	Stop(ctx context.Context) error
	// Recompute rebuilds the records of a block from its ranges, in the same
	// order, for a block the store no longer has (after a crash). It is safe
	// for concurrent use and may be called whether or not the receiver runs.
	// A receiver configured to leave out the ranges it can no longer serve
	// returns the records of the others with a *RangesSkippedError.
	Recompute(ctx context.Context, info batch.BlockInfo) ([]T, error)
}

// RangesSkippedError is returned by Recompute, together with the records
// of the block's other ranges, when the receiver left out on purpose the
// records of some of its ranges: ranges it can no longer serve (trimmed
// past the stream's retention), which it was configured to skip and has
// reported. The driver then runs the block without those ranges, rather
// than fail its batch. Any other error, or records that do not add up to
// the other ranges' counts, fails the batch.
type RangesSkippedError struct {
	// Ranges are the indexes, in BlockInfo.Ranges, of the ranges left out,
	// in ascending order.
	Ranges []int
	// Err says why they were left out.
	Err error
}

// Error names how many ranges were left out, and why.
func (e *RangesSkippedError) Error() string {
	return fmt.Sprintf("source: %d ranges left out: %v", len(e.Ranges), e.Err)
}

// Unwrap returns why the ranges were left out.
func (e *RangesSkippedError) Unwrap() error { return e.Err }

// CompletionObserver is implemented by receivers, or by the hooks they
// register with Runtime.Observe, that want to know when blocks they pushed
// have been fully processed: every output of the batch holding them
// succeeded. With no recovery log, that is when a block's sequence numbers
// become safe to checkpoint (DESIGN.md, guarantee G4). The driver calls
// BlocksCompleted in batch-time order, never concurrently.
type CompletionObserver interface {
	BlocksCompleted(ctx context.Context, blocks []batch.BlockInfo)
}

// BatchObserver is implemented by receivers, or by the hooks they register
// with Runtime.Observe, that adapt how fast they read to how fast the
// pipeline processes what they read (backpressure, as Spark's rate
// controller). After each batch whose outputs all succeeded,
// the driver calls BatchCompleted with what the batch took, after
// BlocksCompleted for its blocks, in batch-time order, never concurrently.
// It must return quickly. It is the completion stream.Listener's
// BatchCompleted reports too, but called from the driver's goroutine, only
// for a batch that succeeded, and with this source's records alone.
type BatchObserver interface {
	BatchCompleted(ctx context.Context, b BatchReport)
}

// BatchReport describes a completed batch to a BatchObserver.
type BatchReport struct {
	// Time is the batch time.
	Time time.Time
	// Interval is the driver's batch interval.
	Interval time.Duration
	// Records is the number of records of the observer's source in the
	// batch.
	Records int
	// SchedulingDelay is how late the batch started: from its batch time
	// (or from when it was due, if that came first) to the start of its
	// first output.
	SchedulingDelay time.Duration
	// ProcessingTime is how long the batch ran.
	ProcessingTime time.Duration
}
