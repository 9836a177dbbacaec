package kinesis

import (
	"math/bits"
	"slices"
	"sync"
	"time"
)

// Stats is a snapshot of a receiver's counters, from Receiver.Stats.
type Stats struct {
	// RecordsRead counts the user records added to blocks (after KPL
	// de-aggregation), over all shards.
	RecordsRead int64
	// Retries counts the retried calls by cause, readers and Recompute
	// together; every cause is present, 0 if never retried. The causes:
	// "throttled" (ProvisionedThroughputExceededException, an HTTP 429 or
	// another throttling code), "limit_exceeded" (LimitExceededException:
	// a control-plane call throttled), "kms_throttling", "server_error"
	// (HTTP 5xx, InternalFailureException), "timeout" (no answer within
	// Config.AttemptTimeout, HTTP 408, a network timeout), "transport" (a
	// connection that failed or broke), "expired_credentials" (refreshed
	// before the retry), "expired_iterator" (a new iterator after the last
	// record read), "resource_in_use" (SubscribeToShard refused within 5s
	// of the previous subscription, with Config.FanOut), "idle_subscription"
	// (a subscription that delivered no event for a minute, with
	// Config.FanOut), "empty_subscription" (a subscription whose event
	// stream ended before its first event, with Config.FanOut).
	Retries map[string]int64
	// MalformedAggregates counts the Kinesis records that start with the
	// KPL aggregate's magic number but do not decode as one (a corrupt
	// aggregate, or data that only starts like one): each is delivered as
	// it is, one user record, and logged at WARN each time a shard's count
	// doubles.
	MalformedAggregates int64
	// OutOfRangeRecords counts the user records of KPL aggregates left out
	// because their hash key is outside the hash key range of the shard
	// they were read from, as the KCL does: after a reshard, the KPL puts
	// them again on their own shard.
	OutOfRangeRecords int64
	// RangesRecomputed counts the ranges Recompute read back.
	RangesRecomputed int64
	// RangesSkipped counts the unavailable ranges Recompute skipped under
	// Config.SkipUnavailableRanges.
	RangesSkipped int64
	// BadLeaseItems is how many items of the lease table the last scan
	// could not read as leases (Config.Leases): each is logged at ERROR and
	// reported (source.Runtime.ReportError) with its fix, and its shard is
	// not read until it is fixed; the other shards go on.
	BadLeaseItems int
	// RefusedShards counts the leased shards this worker handed back
	// because their checkpoint names no record it can read from (reported
	// like BadLeaseItems).
	RefusedShards int64
	// BufferedBytes is the memory of the records read and not yet
	// completed, as the memory budget counts it
	// (source.Runtime.MaxBufferedBytes).
	BufferedBytes int64
	// PeakBufferedBytes is the most BufferedBytes has been.
	PeakBufferedBytes int64
	// Shards holds the state of every shard this receiver reads, or read
	// less than 10 minutes ago, and of the shards whose lease it handed
	// back, by ID: a shard is left out 10 minutes after its reader stopped
	// for good (its lease lost or handed off, or read to its end and
	// finished), once every record read from it is completed, and 10
	// minutes after its lease was handed off or lost if no reader read it
	// (its state not loaded yet); a shard no reader reads here that only the
	// driver's recovery log made known (the completion of its recovered
	// blocks, or Recompute reading them back) is left out 10 minutes after
	// it appeared. So a stream resharded often, or restarted often, does
	// not grow it without bound. A shard read again afterwards starts from
	// zero counters.
	Shards map[string]ShardStats
}

// ShardStats is the state of one shard in a Stats snapshot.
type ShardStats struct {
	// Reading reports whether a reader runs for the shard.
	Reading bool
	// RecordsRead counts the user records of the shard added to blocks.
	RecordsRead int64
	// MillisBehindLatest is how far the reader was behind the tip of the
	// shard after its latest GetRecords call, in milliseconds.
	MillisBehindLatest int64
	// LastAdded is the greatest sequence number added to a block.
	LastAdded string
	// LatestCompleted is the greatest sequence number whose block the
	// driver reported completed (source.CompletionObserver).
	LatestCompleted string
	// Ended reports that a reader read the shard to its end (a reshard
	// closed it).
	Ended bool
	// Drained reports that the shard Ended and every record read from it
	// is stored: its children may start. (Stored, not yet processed: unlike
	// a drained stream.Pipeline, its records may still be in batches to
	// run.)
	Drained bool
	// BytesRead counts the bytes of Kinesis record data GetRecords returned
	// for the shard (before KPL de-aggregation).
	BytesRead int64
	// GetRecordsTime is the time the shard reader's successful GetRecords
	// calls took, summed, from the start of the attempt that succeeded:
	// divided by their number (the sum of GetRecordsLatency), the mean
	// latency.
	GetRecordsTime time.Duration
	// GetRecordsLatency counts those calls by latency, in the buckets of
	// GetRecordsBounds: [i] counts the calls that took at most
	// GetRecordsBounds()[i] and more than the bound before; the last one,
	// those over every bound. Nil if there was no call.
	GetRecordsLatency []int64
	// Retries counts the shard's retried calls by cause (readers and
	// Recompute together), under the names of Stats.Retries; nil if none.
	Retries map[string]int64
	// HandedBack counts the times this receiver gave the shard's lease up
	// on purpose (Config.Leases): released at a drain, handed off to a
	// worker that asked for it, or refused; not when the lease was lost or
	// the shard ended.
	HandedBack int64
}

// getRecordsBounds are the bounds of ShardStats.GetRecordsLatency: from 5ms
// to 10s, as GetRecords answers in tens of milliseconds, and seconds when the
// service or the network is slow.
var getRecordsBounds = [...]time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
	5 * time.Second, 10 * time.Second,
}

// GetRecordsBounds returns the upper bounds, inclusive and ascending, of
// the buckets of ShardStats.GetRecordsLatency, in a new slice.
func GetRecordsBounds() []time.Duration { return slices.Clone(getRecordsBounds[:]) }

// StreamName returns the stream the receiver reads, as configured
// (Config.Stream: a name or an ARN).
func (r *Receiver) StreamName() string { return r.cfg.Stream }

// statsCollector holds the receiver-wide counters. It is safe for
// concurrent use.
type statsCollector struct {
	mu      sync.Mutex
	records int64
	kinesis int64 // Kinesis records read, KPL aggregates counted once
	retries map[retryCause]int64
	badAgg  int64 // records that looked like KPL aggregates but were not (see run.malformed)
	outside int64
	recomp  int64
	skipped int64
	shards  map[string]*shardCounters
}

// shardCounters are the per-shard counters of a statsCollector.
type shardCounters struct {
	bytes   int64
	calls   int64
	time    time.Duration
	latency [len(getRecordsBounds) + 1]int64
	retries map[retryCause]int64
	outside int64 // user records out of the shard's hash key range
	bad     int64 // records that looked like KPL aggregates but were not
}

// shardLocked returns the counters of shard, creating them; s.mu is held.
func (s *statsCollector) shardLocked(shard string) *shardCounters {
	if s.shards == nil {
		s.shards = make(map[string]*shardCounters)
	}
	c, ok := s.shards[shard]
	if !ok {
		c = &shardCounters{}
		s.shards[shard] = c
	}
	return c
}

// shardRetry counts a retry of a call for shard ("" for a call on the
// stream): in the totals, and in the shard's counters.
func (s *statsCollector) shardRetry(shard string, c retryCause) {
	s.retry(c)
	if shard == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.shardLocked(shard)
	if sc.retries == nil {
		sc.retries = make(map[retryCause]int64)
	}
	sc.retries[c]++
}

// getRecords counts one successful GetRecords call of a shard reader: its
// latency and the bytes of data it returned.
func (s *statsCollector) getRecords(shard string, took time.Duration, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.shardLocked(shard)
	sc.calls++
	sc.time += took
	i, _ := slices.BinarySearch(getRecordsBounds[:], took) // the first bound >= took
	sc.latency[i]++
	sc.bytes += bytes
}

// forget drops the per-shard counters of shards (their totals stay).
func (s *statsCollector) forget(shards []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range shards {
		delete(s.shards, id)
	}
}

// addShards adds the per-shard counters to shards, the progress snapshot.
func (s *statsCollector) addShards(shards map[string]ShardStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.shards {
		st := shards[id]
		st.BytesRead, st.GetRecordsTime = c.bytes, c.time
		if c.calls > 0 {
			st.GetRecordsLatency = slices.Clone(c.latency[:])
		}
		st.Retries = causeCounts(c.retries, false)
		shards[id] = st
	}
}

func (s *statsCollector) retry(c retryCause) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retries == nil {
		s.retries = make(map[retryCause]int64)
	}
	s.retries[c]++
}

func (s *statsCollector) read(kinesisRecords, userRecords, badAggregates int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinesis += int64(kinesisRecords)
	s.records += int64(userRecords)
	s.badAgg += int64(badAggregates)
}

// malformedOf counts n records of shard that looked like KPL aggregates
// but were not, and returns the shard's count and whether it reached a
// power of two (when the records are logged).
func (s *statsCollector) malformedOf(shard string, n int) (count int64, warn bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.shardLocked(shard)
	before := sc.bad
	sc.bad += int64(n)
	return sc.bad, bits.Len64(uint64(before)) != bits.Len64(uint64(sc.bad))
}

// outOfRange counts n user records of shard left out for their hash key,
// and reports whether they are the shard's first.
func (s *statsCollector) outOfRange(shard string, n int) (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outside += int64(n)
	sc := s.shardLocked(shard)
	first = sc.outside == 0
	sc.outside += int64(n)
	return first
}

func (s *statsCollector) recomputed(ranges, skipped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recomp += int64(ranges)
	s.skipped += int64(skipped)
}

func (s *statsCollector) snapshot() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		RecordsRead:         s.records,
		Retries:             causeCounts(s.retries, true),
		OutOfRangeRecords:   s.outside,
		MalformedAggregates: s.badAgg,
		RangesRecomputed:    s.recomp,
		RangesSkipped:       s.skipped,
	}
}

// causeCounts returns m keyed by cause name; with all, every cause is
// present (0 if absent from m); without, nil for an empty m.
func causeCounts(m map[retryCause]int64, all bool) map[string]int64 {
	if len(m) == 0 && !all {
		return nil
	}
	out := make(map[string]int64, len(retryCauses))
	if all {
		for _, c := range retryCauses {
			out[string(c)] = 0
		}
	}
	for c, n := range m {
		out[string(c)] = n
	}
	return out
}

// readCounts returns the Kinesis records read (a KPL aggregate counts once) and
// the records among them that looked like KPL aggregates but were not.
func (s *statsCollector) readCounts() (kinesisRecords, badAggregates int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinesis, s.badAgg
}
