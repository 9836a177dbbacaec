package stream

import (
	"time"

	"github.com/weirstream/weir/batch"
)

// Listener is told what the driver does: batches scheduled, started and
// completed, receivers started, failing and stopped. It is for metrics and
// monitoring, like Spark's StreamingListener.
//
// Events are delivered asynchronously, as Spark's listener bus does: the
// driver posts them to a queue and goes on, and one goroutine of the
// Pipeline calls the listeners, one event at a time, in the order the
// events happened (for one batch: scheduled, started, completed), never
// while the driver holds a lock. So a slow listener never delays a batch,
// and a method may call any method of the Pipeline, Stop or Drain included
// (but must not wait on Done: Done waits for the queue). An event may
// therefore reach the listeners after the outputs it describes have run,
// and every event of a Run is delivered before Run returns and Done is
// closed (a Listener that does not return is warned about, at WARN, while
// Run waits for it, for at most Config.DrainTimeout: then Run returns
// without the events left, saying so at ERROR, so that a stuck Listener
// cannot keep a worker from exiting). The events waiting for a listener that does not keep
// up are queued without bound, not dropped: once 1000 wait, and again as
// they double, the Pipeline warns at WARN, naming the listener, and says at
// INFO once they are delivered. A Listener that panics is told nothing more: the panic
// is logged at ERROR with its stack, and the pipeline and the other
// listeners go on.
//
// Embed NopListener to implement only the methods you need.
type Listener interface {
	// BatchScheduled is called when a batch has been cut and queued to run.
	BatchScheduled(BatchInfo)
	// BatchStarted is called for a batch whose outputs are starting.
	BatchStarted(BatchInfo)
	// BatchCompleted is called after a batch ran, whether or not it
	// succeeded: Err is nil if every output succeeded and its blocks were
	// completed. (A receiver's source.BatchObserver hears of the same
	// completion, synchronously and only for a batch that succeeded.)
	BatchCompleted(BatchInfo)
	// ReceiverStarted is called just before a receiver's Start is called.
	ReceiverStarted(ReceiverInfo)
	// ReceiverError is called for an error a receiver reported through
	// source.Runtime.ReportError, for an error its Start or Stop returned,
	// and for a failure to recompute one of its blocks.
	ReceiverError(ReceiverInfo)
	// ReceiverStopped is called after a receiver's Start returned.
	ReceiverStopped(ReceiverInfo)
}

// BatchInfo describes a batch for a Listener. Fields not yet known when an
// event is sent are zero: ProcessingTime before BatchCompleted, and
// SchedulingDelay before BatchStarted.
type BatchInfo struct {
	// Time is the batch time.
	Time batch.Time
	// Blocks is the number of input blocks, of all sources.
	Blocks int
	// Records is the number of input records, of all sources.
	Records int
	// SchedulingDelay is how late the batch started: from its batch time to
	// the start of its first output, or from when it was due if that came
	// first (a restart after batch times its log reserved ahead of the
	// clock cuts its batches ahead of it, an interval apart).
	SchedulingDelay time.Duration
	// ProcessingTime is how long the batch ran, outputs and completion.
	ProcessingTime time.Duration
	// Err is why the batch failed; nil if it succeeded.
	Err error
	// Recovered reports a batch allocated before a restart and read back
	// from the recovery log: it runs again with the same time and blocks.
	Recovered bool
	// RecoveredRecords is how many of Records the receivers of an earlier
	// Run read: all of them in a Recovered batch; in the first batch after
	// a restart, those of the blocks stored before it and in no batch yet,
	// recomputed from their ranges. The receivers of this Run read the
	// others.
	RecoveredRecords int
	// Ranges are the Kinesis sequence-number ranges (or other source
	// ranges) of the input blocks, of all sources, in block order. The
	// slice is shared by every listener: do not modify it.
	Ranges []batch.SeqRange
	// Unbatched is the number of blocks, of all sources, stored and in no
	// batch yet when the event was sent: blocks wait there for the next
	// batch time, and pile up while the batch timer waits for room
	// (DESIGN.md, "Memory and flow control").
	Unbatched int
	// Outputs are what the outputs' failure policies did in the batch (see
	// Retry and Quarantine), one per output in declaration order, zeros
	// included, then one per keyed, window, state or Transform operator with
	// Quarantine, in declaration order (their letters' DeadLetter.Output); set for
	// BatchCompleted only. The slice is shared by every listener: do not
	// modify it.
	Outputs []OutputInfo
}

// ReceiverInfo describes a receiver for a Listener.
type ReceiverInfo struct {
	// Source is the index of the receiver's source, in From call order.
	Source int
	// Err is the error reported, for ReceiverError; for ReceiverStopped, the
	// error Start returned if the receiver failed, otherwise nil.
	Err error
}

// NopListener is a Listener that ignores every event: embed it in a type to
// implement only some of Listener's methods.
type NopListener struct{}

// BatchScheduled does nothing.
func (NopListener) BatchScheduled(BatchInfo) {}

// BatchStarted does nothing.
func (NopListener) BatchStarted(BatchInfo) {}

// BatchCompleted does nothing.
func (NopListener) BatchCompleted(BatchInfo) {}

// ReceiverStarted does nothing.
func (NopListener) ReceiverStarted(ReceiverInfo) {}

// ReceiverError does nothing.
func (NopListener) ReceiverError(ReceiverInfo) {}

// ReceiverStopped does nothing.
func (NopListener) ReceiverStopped(ReceiverInfo) {}
