package metrics

import (
	"context"
	"slices"
	"time"
)

// Receiver is what a Collector samples of a source's receiver. It is
// defined here, in this package's own types, so that metrics depends on no
// source: github.com/weirstream/weir/metrics/kinesismetrics adapts a Kinesis
// receiver, and another source implements it directly.
type Receiver interface {
	// Name names the receiver in metric labels and on the status page:
	// the same after a restart and different from the other receivers'
	// (for Kinesis, the stream as configured).
	Name() string
	// Stats returns its counters and shard states now. It must not block
	// (no I/O): New calls it once, before the receiver starts, so that the
	// counters are exported from the first scrape.
	Stats() ReceiverStats
}

// ReceiverStats is a snapshot of a Receiver's counters. Counters only grow
// while the process runs.
type ReceiverStats struct {
	// WorkerID is the receiver's lease owner name, "" without leases.
	WorkerID string
	// RecordsRead counts the records read, over all shards.
	RecordsRead int64
	// Retries counts the retried calls by cause, over all shards and calls
	// on the stream. Give every cause the source knows, at 0 if need be, so
	// that its counter exists from the first scrape.
	Retries map[string]int64
	// RangesRecomputed counts the ranges read back to rebuild lost blocks.
	RangesRecomputed int64
	// RangesSkipped counts the unavailable ranges skipped while rebuilding.
	RangesSkipped int64
	// Held are the IDs of the shards whose leases the receiver holds.
	Held []string
	// Shards holds the state of every shard read or checkpointed, by ID.
	Shards map[string]ShardStats
}

// ShardStats is the state of one shard in a ReceiverStats.
type ShardStats struct {
	// Reading reports whether a reader runs for the shard.
	Reading bool
	// Ended reports that the shard was read to its end; Drained that,
	// besides, every record read from it is stored.
	Ended, Drained bool
	// RecordsRead counts the records of the shard read.
	RecordsRead int64
	// BytesRead counts the bytes of record data read from the shard.
	BytesRead int64
	// Behind is how far the reader was behind the tip of the shard after
	// its latest read (Kinesis's MillisBehindLatest).
	Behind time.Duration
	// LastAdded is the greatest sequence number read; LatestCompleted the
	// greatest one whose batch completed.
	LastAdded, LatestCompleted string
	// ReadLatency is the latency of the successful read calls
	// (GetRecords).
	ReadLatency Histogram
	// Retries counts the shard's retried calls by cause; nil if none.
	Retries map[string]int64
	// Checkpointed reports whether the receiver checkpoints the shard.
	Checkpointed bool
	// Checkpoint is the shard's last checkpoint known to the receiver:
	// the last it wrote or, before its first, the one stored when it took
	// the lease (a sequence number, or a position such as TRIM_HORIZON);
	// "" if none.
	Checkpoint string
	// CheckpointCommits counts the checkpoints the receiver wrote for the
	// shard; CheckpointFailures those that failed every attempt.
	CheckpointCommits, CheckpointFailures int64
	// HandedBack counts the times the receiver gave the shard's lease up
	// on purpose: handed back at a drain, handed off to a worker that
	// asked for it, or refused. A lease no longer held whose count grew
	// since the last sample is not counted as lost (LeaseCounts).
	HandedBack int64
}

// Histogram counts durations in buckets.
type Histogram struct {
	// Bounds are the buckets' upper bounds, inclusive, in ascending order.
	Bounds []time.Duration
	// Counts holds len(Bounds)+1 counts: Counts[i] is the number of
	// durations at most Bounds[i] and over Bounds[i-1]; the last one counts
	// those over every bound. Nil when nothing was counted.
	Counts []int64
	// Sum is the sum of the durations counted.
	Sum time.Duration
}

// newHistogram returns an empty Histogram of bounds.
func newHistogram(bounds []time.Duration) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]int64, len(bounds)+1)}
}

// observe counts d.
func (h *Histogram) observe(d time.Duration) {
	i, _ := slices.BinarySearch(h.Bounds, d) // the first bound >= d
	h.Counts[i]++
	h.Sum += d
}

// clone returns a copy of h that shares no memory with it.
func (h Histogram) clone() Histogram {
	h.Counts = append([]int64(nil), h.Counts...)
	return h
}

// Count returns the number of durations counted.
func (h Histogram) Count() int64 {
	var n int64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Mean returns the mean duration, 0 if none was counted.
func (h Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return h.Sum / time.Duration(n)
}

// batchBounds are the bucket bounds of the batch delay histograms
// (BatchCounts): from 10ms to 500s, in steps of 1, 2.5, 5, to cover batch
// intervals from 100ms to minutes.
var batchBounds = []time.Duration{
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 25 * time.Second, 50 * time.Second,
	100 * time.Second, 250 * time.Second, 500 * time.Second,
}

// LeaseLister lists a lease table; kinesismetrics.Leases adapts a
// DynamoDB lease table.
type LeaseLister interface {
	// List returns every lease. If it read the table but some items
	// could not be read as leases, it returns the others, in a non-nil
	// slice, with an error naming the items: the Collector shows those
	// leases and the error. A nil slice with an error is a failed
	// listing: the Collector keeps showing the last listing.
	List(ctx context.Context) ([]Lease, error)
}

// Lease is one lease of the lease table.
type Lease struct {
	// Shard is the shard ID.
	Shard string
	// Owner is the worker holding the lease, "" if none.
	Owner string
	// Worker is Owner without what changes at every restart (the process
	// ID and random suffix of a default worker ID), so that a metric label
	// keeps its series across restarts. Default (""): Owner.
	Worker string
	// Counter is the lease's version: every write adds one.
	Counter int64
	// Checkpoint is the shard's stored checkpoint.
	Checkpoint string
	// Parents are the shard's parent shard IDs.
	Parents []string
}
