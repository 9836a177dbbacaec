package prometheus

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/source/kinesis"
)

// Collector is a prometheus.Collector that reads a metrics.Collector's
// Snapshot at every scrape. It is safe for concurrent use.
type Collector struct {
	src *metrics.Collector
}

// New returns a prometheus.Collector of c's numbers; register it with a
// prometheus.Registry.
func New(c *metrics.Collector) *Collector { return &Collector{src: c} }

type desc struct {
	d    *prometheus.Desc
	kind prometheus.ValueType // CounterValue or GaugeValue; summaries are marked apart
}

func newDesc(name, help string, kind prometheus.ValueType, labels ...string) desc {
	return desc{d: prometheus.NewDesc(name, help, labels, nil), kind: kind}
}

var (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
	// summary marks a desc sent with NewConstSummary (sum and count).
	summary = prometheus.UntypedValue
)

// The descriptions are immutable values, not state: they may be shared.
var (
	batchesScheduled = newDesc("weir_batches_scheduled_total", "Batches cut and queued.", counter)
	batchesCompleted = newDesc("weir_batches_completed_total", "Batches that ran, failed ones included.", counter)
	batchesFailed    = newDesc("weir_batches_failed_total", "Batches that failed.", counter)
	batchesPending   = newDesc("weir_batches_pending", "Batches queued and not started.", gauge)
	batchRecords     = newDesc("weir_batch_input_records_total", "Input records of completed batches.", counter)
	schedDelay       = newDesc("weir_batch_scheduling_delay_seconds", "From a batch's time to the start of its outputs.", summary)
	procTime         = newDesc("weir_batch_processing_time_seconds", "How long a batch ran.", summary)
	totalDelay       = newDesc("weir_batch_total_delay_seconds", "From a batch's time to its completion.", summary)
	lastSchedDelay   = newDesc("weir_batch_last_scheduling_delay_seconds", "Scheduling delay of the latest completed batch.", gauge)
	lastProcTime     = newDesc("weir_batch_last_processing_time_seconds", "Processing time of the latest completed batch.", gauge)
	lastTotalDelay   = newDesc("weir_batch_last_total_delay_seconds", "Total delay of the latest completed batch.", gauge)
	unbatchedRecords = newDesc("weir_unbatched_records", "Records read and in no batch yet.", gauge)
	unbatchedBlocks  = newDesc("weir_unbatched_blocks", "Blocks stored and in no batch yet, as of the latest batch event.", gauge)

	shardRecords = newDesc("weir_kinesis_records_read_total", "User records read from the shard, after KPL de-aggregation.", counter, "source", "shard")
	shardBytes   = newDesc("weir_kinesis_bytes_read_total", "Bytes of Kinesis record data read from the shard.", counter, "source", "shard")
	shardLatency = newDesc("weir_kinesis_get_records_seconds", "Latency of the shard reader's successful GetRecords calls.", summary, "source", "shard")
	shardBehind  = newDesc("weir_kinesis_behind_latest_seconds", "MillisBehindLatest of the shard's latest GetRecords, in seconds.", gauge, "source", "shard")
	retries      = newDesc("weir_kinesis_retries_total", "Retried Kinesis calls by cause; shard is empty for calls on the stream.", counter, "source", "shard", "cause")
	shardReading = newDesc("weir_kinesis_shard_reading", "1 while a reader runs for the shard.", gauge, "source", "shard")

	cpCommits  = newDesc("weir_checkpoint_commits_total", "Checkpoints written.", counter, "source", "shard")
	cpFailures = newDesc("weir_checkpoint_failures_total", "Checkpoints that failed every attempt.", counter, "source", "shard")
	cpLag      = newDesc("weir_checkpoint_lag_seconds", "How long the oldest completed record of the shard not yet checkpointed has waited.", gauge, "source", "shard")

	leasesHeld   = newDesc("weir_leases_held", "Leases this worker holds.", gauge, "source")
	leasesAcq    = newDesc("weir_lease_acquisitions_total", "Leases acquired, by how: taken (unowned), expired, stolen.", counter, "source", "how")
	leasesLost   = newDesc("weir_leases_lost_total", "Leases lost before their shard ended.", counter, "source")
	tableLeases  = newDesc("weir_lease_table_leases", "Leases in the lease table by owner (empty: unowned).", gauge, "owner")
	tableWorkers = newDesc("weir_lease_table_workers", "Distinct lease owners in the lease table.", gauge)

	recBatches = newDesc("weir_recovery_batches_total", "Batches recomputed after a restart.", counter)
	recRanges  = newDesc("weir_recovery_ranges_replayed_total", "Sequence ranges re-read from Kinesis to rebuild lost blocks.", counter, "source")
	recSkipped = newDesc("weir_recovery_ranges_skipped_total", "Unavailable ranges skipped.", counter, "source")

	warningsActive = newDesc("weir_warnings_active", "Conditions warned about that still hold.", gauge, "kind")
)

var all = []desc{
	batchesScheduled, batchesCompleted, batchesFailed, batchesPending, batchRecords,
	schedDelay, procTime, totalDelay, lastSchedDelay, lastProcTime, lastTotalDelay, unbatchedRecords, unbatchedBlocks,
	shardRecords, shardBytes, shardLatency, shardBehind, retries, shardReading,
	cpCommits, cpFailures, cpLag,
	leasesHeld, leasesAcq, leasesLost, tableLeases, tableWorkers,
	recBatches, recRanges, recSkipped, warningsActive,
}

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range all {
		ch <- d.d
	}
}

// Collect sends the metrics of a fresh Snapshot. Label values come from
// outside (shard IDs, lease owners from the lease table): one that is not
// valid UTF-8 is sent with its bad bytes replaced by U+FFFD, and a metric
// the client library still refuses is sent as an invalid metric, which
// fails the scrape with its error instead of panicking.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Snapshot()
	send := func(d desc, v float64, labels ...string) {
		m, err := prometheus.NewConstMetric(d.d, d.kind, v, validUTF8(labels)...)
		ch <- orInvalid(d, m, err)
	}
	sum := func(d desc, count int64, total time.Duration, labels ...string) {
		m, err := prometheus.NewConstSummary(d.d, uint64(max(count, 0)), total.Seconds(), nil, validUTF8(labels)...)
		ch <- orInvalid(d, m, err)
	}
	b := s.Batches
	send(batchesScheduled, float64(b.Scheduled))
	send(batchesCompleted, float64(b.Completed))
	send(batchesFailed, float64(b.Failed))
	send(batchesPending, float64(b.Pending))
	send(batchRecords, float64(b.Records))
	sum(schedDelay, b.Completed, b.SchedulingDelay)
	sum(procTime, b.Completed, b.ProcessingTime)
	sum(totalDelay, b.Completed, b.TotalDelay)
	if n := len(s.Recent); n > 0 {
		last := s.Recent[n-1]
		send(lastSchedDelay, last.SchedulingDelay.Seconds())
		send(lastProcTime, last.ProcessingTime.Seconds())
		send(lastTotalDelay, last.TotalDelay.Seconds())
	}
	send(unbatchedRecords, float64(b.UnbatchedRecords))
	send(unbatchedBlocks, float64(b.UnbatchedBlocks))
	send(recBatches, float64(b.Recovered))

	for _, r := range s.Receivers {
		src := strconv.Itoa(r.Index)
		collectShards(send, sum, src, r.Stats)
		for _, id := range slices.Sorted(maps.Keys(r.Checkpoint.Shards)) {
			cs := r.Checkpoint.Shards[id]
			send(cpCommits, float64(cs.Commits), src, id)
			send(cpFailures, float64(cs.Failures), src, id)
			send(cpLag, r.CheckpointLag[id].Seconds(), src, id)
		}
		send(leasesHeld, float64(len(r.Held)), src)
		send(leasesAcq, float64(r.Leases.Taken), src, "taken")
		send(leasesAcq, float64(r.Leases.Expired), src, "expired")
		send(leasesAcq, float64(r.Leases.Stolen), src, "stolen")
		send(leasesLost, float64(r.Leases.Lost), src)
		send(recRanges, float64(r.Stats.RangesRecomputed), src)
		send(recSkipped, float64(r.Stats.RangesSkipped), src)
	}
	if f := s.Fleet; f != nil && !f.Listed.IsZero() {
		byOwner := map[string]int{}
		for _, l := range f.Leases {
			byOwner[l.Owner]++
		}
		for _, owner := range slices.Sorted(maps.Keys(byOwner)) {
			send(tableLeases, float64(byOwner[owner]), owner)
		}
		send(tableWorkers, float64(len(f.Workers)))
	}
	kinds := map[string]int{"scheduling_delay": 0, "shard_lag": 0}
	for _, w := range s.Warnings {
		kinds[w.Kind]++
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		send(warningsActive, float64(kinds[k]), k)
	}
}

// collectShards sends the per-shard metrics of one receiver's stats, and
// its retries of calls on the stream under shard "".
func collectShards(send func(desc, float64, ...string), sum func(desc, int64, time.Duration, ...string), src string, st kinesis.Stats) {
	onStream := maps.Clone(st.Retries)
	for _, id := range slices.Sorted(maps.Keys(st.Shards)) {
		sh := st.Shards[id]
		send(shardRecords, float64(sh.RecordsRead), src, id)
		send(shardBytes, float64(sh.BytesRead), src, id)
		sum(shardLatency, sh.GetRecordsCalls, sh.GetRecordsTime, src, id)
		send(shardBehind, float64(sh.MillisBehindLatest)/1000, src, id)
		reading := 0.0
		if sh.Reading {
			reading = 1
		}
		send(shardReading, reading, src, id)
		for _, cause := range slices.Sorted(maps.Keys(sh.Retries)) {
			send(retries, float64(sh.Retries[cause]), src, id, string(cause))
			onStream[cause] -= sh.Retries[cause]
		}
	}
	for _, cause := range slices.Sorted(maps.Keys(onStream)) {
		if n := onStream[cause]; n > 0 {
			send(retries, float64(n), src, "", string(cause))
		}
	}
}

// validUTF8 returns labels with each value that is not valid UTF-8 (which
// the exposition format cannot carry) made valid, its bad bytes replaced by
// U+FFFD. It copies labels only when one changes.
func validUTF8(labels []string) []string {
	out := labels
	for i, l := range labels {
		if utf8.ValidString(l) {
			continue
		}
		if &out[0] == &labels[0] {
			out = slices.Clone(labels)
		}
		out[i] = strings.ToValidUTF8(l, "\uFFFD")
	}
	return out
}

// orInvalid returns m, or, if making it failed, a metric that reports err
// to the registry, which fails the scrape with it.
func orInvalid(d desc, m prometheus.Metric, err error) prometheus.Metric {
	if err != nil {
		return prometheus.NewInvalidMetric(d.d, err)
	}
	return m
}
