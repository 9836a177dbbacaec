package metrics

import (
	"time"

	"github.com/weirstream/weir/batch"
)

// Snapshot is what a Collector knows at one moment: a copy of its numbers,
// unrelated to the state snapshots a recovery log keeps. The caller may keep
// it and modify its fields, but not the slices and maps they hold (ranges,
// stats, leases), which later snapshots share.
type Snapshot struct {
	// Time is when the snapshot was taken, on the Collector's clock.
	Time time.Time
	// BatchInterval is the pipeline's batch interval (Config.BatchInterval).
	BatchInterval time.Duration
	// Batches are the batch counters, since the Collector was made.
	Batches BatchCounts
	// Recent are the latest completed batches, failed ones included, oldest
	// first: at most Config.History of them.
	Recent []BatchSample
	// Failed are the latest failed batches, oldest first: at most
	// Config.History of them.
	Failed []BatchSample
	// Receivers are the latest samples of Config.Receivers, in their order;
	// empty before the first sample.
	Receivers []ReceiverSample
	// Fleet is the lease table as last listed; nil without Config.Leases
	// or before the first listing.
	Fleet *Fleet
	// Warnings are the conditions warned about that still hold.
	Warnings []Warning
	// Outputs count what each output's failure policy did (stream.Retry,
	// stream.Quarantine), in declaration order, then what each keyed,
	// window or state operator with stream.Quarantine set aside (as
	// stream.BatchInfo.Outputs); empty before the first completed batch.
	Outputs []OutputCounts
}

// OutputCounts counts what an output's failure policy did, since the
// Collector was made.
type OutputCounts struct {
	// Output describes the output as stream's errors do:
	// `ForEach("mail") of Map (stream 1)`.
	Output string
	// Retries counts the units (partitions, or the whole output) tried
	// again after a failure.
	Retries int64
	// Quarantined counts the records sent to dead letters.
	Quarantined int64
}

// BatchCounts counts batches. Durations are in the Collector's clock.
type BatchCounts struct {
	// Scheduled counts the batches cut and queued (BatchScheduled events).
	Scheduled int64
	// Completed counts the batches that ran, failed ones included.
	Completed int64
	// Failed counts the batches that failed.
	Failed int64
	// Recovered counts the completed batches that were allocated before a
	// restart and recomputed from the recovery log.
	Recovered int64
	// Pending is the number of batches scheduled and not yet started.
	Pending int
	// Records counts the input records of the completed batches.
	Records int64
	// SchedulingDelay, ProcessingTime and TotalDelay count the completed
	// batches by their delays (see BatchSample); their Mean is the mean.
	SchedulingDelay, ProcessingTime, TotalDelay Histogram
	// UnbatchedRecords is the number of records the Receivers read that
	// are in no scheduled batch yet (in open or queued blocks, or stored
	// and waiting for the next batch); 0 without Receivers. It counts
	// records of this process only: with sources other than the Receivers
	// it is too low.
	UnbatchedRecords int64
	// UnbatchedBlocks is the number of blocks stored and in no batch yet,
	// as of the latest batch event (stream.BatchInfo.Unbatched).
	UnbatchedBlocks int
}

// BatchSample describes one completed batch.
type BatchSample struct {
	// Time is the batch time.
	Time batch.Time
	// Records and Blocks are the batch's input.
	Records, Blocks int
	// SchedulingDelay is from the batch time to the start of its outputs.
	SchedulingDelay time.Duration
	// ProcessingTime is how long the batch ran.
	ProcessingTime time.Duration
	// TotalDelay is SchedulingDelay + ProcessingTime: from the batch time
	// to its completion.
	TotalDelay time.Duration
	// Recovered reports a batch recomputed after a restart.
	Recovered bool
	// Err is why the batch failed, "" if it succeeded; cut to 4 KiB.
	Err string
	// Ranges are the sequence-number ranges of its input blocks.
	Ranges []batch.SeqRange
}

// ReceiverSample is one sample of a Receiver.
type ReceiverSample struct {
	// Index is the receiver's index in Config.Receivers.
	Index int
	// Name is the receiver's Name.
	Name string
	// Stats are the receiver's counters and shard states.
	Stats ReceiverStats
	// CheckpointLag is, per shard, how long the oldest completed record
	// its checkpoint does not cover has waited (as seen by the samples): 0
	// when the checkpoint is up to date. In normal operation it stays under
	// about the checkpoint interval plus the sample interval; more means
	// checkpoints fail or are held back. A shard is absent until the
	// receiver first tried to checkpoint it (one checkpoint interval).
	CheckpointLag map[string]time.Duration
	// Leases counts the receiver's lease changes.
	Leases LeaseCounts
}

// LeaseCounts counts one worker's lease changes, as seen between samples: a
// lease taken and lost between two samples is not counted.
type LeaseCounts struct {
	// Taken counts leases acquired that had no owner (new shards, leases
	// handed back).
	Taken int64
	// Expired counts leases acquired from another worker that had stopped
	// renewing them. Telling Expired from Stolen needs Config.Leases; without
	// it both count as Taken.
	Expired int64
	// Stolen counts leases acquired from a live worker, to even the spread.
	Stolen int64
	// Lost counts leases no longer held, other than those of shards read to
	// their end and those handed back.
	Lost int64
	// HandedBack counts leases the worker gave up on purpose: at a drain,
	// to a worker that asked for them (a steal towards balance), or
	// refused (see ShardStats.HandedBack). A Receiver that does not report
	// them counts them as Lost.
	HandedBack int64
}

// Fleet is the lease table: which worker reads which shard, how far.
type Fleet struct {
	// Listed is when the table was last listed successfully.
	Listed time.Time
	// Leases are every lease, by shard ID.
	Leases []Lease
	// Workers are the owners of the leases, sorted, without "".
	Workers []string
	// Err is the error of the latest listing, "" if it succeeded; cut to
	// 4 KiB.
	Err string
	// Unreadable is the error of the latest listing that read the table
	// (at Listed) about its items that could not be read as leases (and
	// are not in Leases): each named, with what is wrong and the fix; ""
	// if there were none. Cut to 4 KiB.
	Unreadable string
}

// Warning is a condition the Collector warned about that still holds.
type Warning struct {
	// Kind is "scheduling_delay", "shard_lag" or "lease_listing" (the
	// lease table cannot be listed).
	Kind string
	// Stream is the Name of the receiver reading the shard of a
	// "shard_lag" warning (shard IDs repeat across streams); "" for the
	// other kinds.
	Stream string
	// Subject is what it is about: "" for the pipeline, a shard ID.
	Subject string
	// Since is when it was first warned about.
	Since time.Time
	// Message is the text logged, with the numbers and the likely fix.
	Message string
}
