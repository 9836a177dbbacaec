package prometheus

import (
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirstream/weir/metrics"
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
	kind prometheus.ValueType // CounterValue or GaugeValue; histograms are marked apart
}

func newDesc(name, help string, kind prometheus.ValueType, labels ...string) desc {
	return desc{d: prometheus.NewDesc(name, help, labels, nil), kind: kind}
}

var (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
	// histogram marks a desc sent with NewConstHistogram.
	histogram = prometheus.UntypedValue
)

// The descriptions are immutable values, not state: they may be shared.
var (
	batchesScheduled = newDesc("weir_batches_scheduled_total", "Batches cut and queued.", counter)
	batchesCompleted = newDesc("weir_batches_completed_total", "Batches that ran, failed ones included.", counter)
	batchesFailed    = newDesc("weir_batches_failed_total", "Batches that failed.", counter)
	batchesPending   = newDesc("weir_batches_pending", "Batches queued and not started.", gauge)
	batchRecords     = newDesc("weir_batch_input_records_total", "Input records of completed batches.", counter)
	schedDelay       = newDesc("weir_batch_scheduling_delay_seconds", "From a batch's time to the start of its outputs.", histogram)
	procTime         = newDesc("weir_batch_processing_time_seconds", "How long a batch ran.", histogram)
	totalDelay       = newDesc("weir_batch_total_delay_seconds", "From a batch's time to its completion.", histogram)
	lastSchedDelay   = newDesc("weir_batch_last_scheduling_delay_seconds", "Scheduling delay of the latest completed batch.", gauge)
	lastProcTime     = newDesc("weir_batch_last_processing_time_seconds", "Processing time of the latest completed batch.", gauge)
	lastTotalDelay   = newDesc("weir_batch_last_total_delay_seconds", "Total delay of the latest completed batch.", gauge)
	unbatchedRecords = newDesc("weir_unbatched_records", "Records read and in no batch yet.", gauge)
	unbatchedBlocks  = newDesc("weir_unbatched_blocks", "Blocks stored and in no batch yet, as of the latest batch event.", gauge)

	shardRecords = newDesc("weir_kinesis_records_read_total", "User records read from the shard, after KPL de-aggregation.", counter, "stream", "shard")
	shardBytes   = newDesc("weir_kinesis_read_bytes_total", "Bytes of Kinesis record data read from the shard.", counter, "stream", "shard")
	shardLatency = newDesc("weir_kinesis_get_records_duration_seconds", "Latency of the shard reader's successful GetRecords calls.", histogram, "stream", "shard")
	shardBehind  = newDesc("weir_kinesis_behind_latest_seconds", "MillisBehindLatest of the shard's latest GetRecords, in seconds; sent while a reader runs for the shard.", gauge, "stream", "shard")
	retries      = newDesc("weir_kinesis_retries_total", "Retried Kinesis calls by cause, over the shards and the calls on the stream.", counter, "stream", "cause")
	shardReading = newDesc("weir_kinesis_shard_reading", "1 while a reader runs for the shard.", gauge, "stream", "shard")

	cpCommits  = newDesc("weir_checkpoint_commits_total", "Checkpoints written.", counter, "stream", "shard")
	cpFailures = newDesc("weir_checkpoint_failures_total", "Checkpoints that failed every attempt.", counter, "stream", "shard")
	cpLag      = newDesc("weir_checkpoint_lag_seconds", "How long the oldest completed record of the shard not yet checkpointed has waited.", gauge, "stream", "shard")

	leasesHeld   = newDesc("weir_leases_held", "Leases this worker holds.", gauge, "stream")
	leasesAcq    = newDesc("weir_lease_acquisitions_total", "Leases acquired, by how: taken (unowned), expired, stolen.", counter, "stream", "how")
	leasesLost   = newDesc("weir_leases_lost_total", "Leases lost before their shard ended, other than those handed back.", counter, "stream")
	leasesGiven  = newDesc("weir_leases_handed_back_total", "Leases given up on purpose: at a drain, to a worker that asked for them, or refused.", counter, "stream")
	tableLeases  = newDesc("weir_lease_table_leases", "Leases in the lease table by worker (its ID without the pid and random suffix of a default ID; empty: unowned).", gauge, "worker")
	tableWorkers = newDesc("weir_lease_table_workers", "Distinct lease owners in the lease table.", gauge)

	recBatches = newDesc("weir_recovery_batches_total", "Batches recomputed after a restart.", counter)
	recRanges  = newDesc("weir_recovery_ranges_replayed_total", "Sequence ranges re-read from Kinesis to rebuild lost blocks.", counter, "stream")
	recSkipped = newDesc("weir_recovery_ranges_skipped_total", "Unavailable ranges skipped.", counter, "stream")

	outRetries     = newDesc("weir_output_retries_total", "Units of the output (partitions, or the whole output) tried again after a failure.", counter, "output")
	outQuarantined = newDesc("weir_output_quarantined_records_total", "Records the output's failure policy sent to dead letters.", counter, "output")

	warningsActive = newDesc("weir_warnings_active", "Conditions warned about that still hold.", gauge, "kind")
)

var all = []desc{
	batchesScheduled, batchesCompleted, batchesFailed, batchesPending, batchRecords,
	schedDelay, procTime, totalDelay, lastSchedDelay, lastProcTime, lastTotalDelay, unbatchedRecords, unbatchedBlocks,
	shardRecords, shardBytes, shardLatency, shardBehind, retries, shardReading,
	cpCommits, cpFailures, cpLag,
	leasesHeld, leasesAcq, leasesLost, leasesGiven, tableLeases, tableWorkers,
	recBatches, recRanges, recSkipped, outRetries, outQuarantined, warningsActive,
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
	hist := func(d desc, h metrics.Histogram, labels ...string) {
		m, err := constHistogram(d, h, validUTF8(labels))
		ch <- orInvalid(d, m, err)
	}
	b := s.Batches
	send(batchesScheduled, float64(b.Scheduled))
	send(batchesCompleted, float64(b.Completed))
	send(batchesFailed, float64(b.Failed))
	send(batchesPending, float64(b.Pending))
	send(batchRecords, float64(b.Records))
	hist(schedDelay, b.SchedulingDelay)
	hist(procTime, b.ProcessingTime)
	hist(totalDelay, b.TotalDelay)
	if n := len(s.Recent); n > 0 {
		last := s.Recent[n-1]
		send(lastSchedDelay, last.SchedulingDelay.Seconds())
		send(lastProcTime, last.ProcessingTime.Seconds())
		send(lastTotalDelay, last.TotalDelay.Seconds())
	}
	send(unbatchedRecords, float64(b.UnbatchedRecords))
	send(unbatchedBlocks, float64(b.UnbatchedBlocks))
	send(recBatches, float64(b.Recovered))
	for _, o := range s.Outputs {
		send(outRetries, float64(o.Retries), o.Output)
		send(outQuarantined, float64(o.Quarantined), o.Output)
	}

	for _, r := range s.Receivers {
		src := r.Name
		collectShards(send, hist, r)
		for _, cause := range slices.Sorted(maps.Keys(r.Stats.Retries)) {
			send(retries, float64(r.Stats.Retries[cause]), src, cause)
		}
		send(leasesHeld, float64(len(r.Stats.Held)), src)
		send(leasesAcq, float64(r.Leases.Taken), src, "taken")
		send(leasesAcq, float64(r.Leases.Expired), src, "expired")
		send(leasesAcq, float64(r.Leases.Stolen), src, "stolen")
		send(leasesLost, float64(r.Leases.Lost), src)
		send(leasesGiven, float64(r.Leases.HandedBack), src)
		send(recRanges, float64(r.Stats.RangesRecomputed), src)
		send(recSkipped, float64(r.Stats.RangesSkipped), src)
	}
	if f := s.Fleet; f != nil && !f.Listed.IsZero() {
		byWorker := map[string]int{}
		for _, l := range f.Leases {
			w := l.Worker
			if w == "" {
				w = l.Owner
			}
			// Counted by the label value sent: owners that differ only
			// in bytes that are not UTF-8 share one, which sent twice
			// would fail the scrape.
			byWorker[strings.ToValidUTF8(w, "\uFFFD")]++
		}
		for _, w := range slices.Sorted(maps.Keys(byWorker)) {
			send(tableLeases, float64(byWorker[w]), w)
		}
		send(tableWorkers, float64(len(f.Workers)))
	}
	kinds := map[string]int{"scheduling_delay": 0, "shard_lag": 0, "lease_listing": 0}
	for _, w := range s.Warnings {
		kinds[w.Kind]++
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		send(warningsActive, float64(kinds[k]), k)
	}
}

// collectShards sends the per-shard metrics of one receiver's sample.
func collectShards(send func(desc, float64, ...string), hist func(desc, metrics.Histogram, ...string), r metrics.ReceiverSample) {
	src := r.Name
	for _, id := range slices.Sorted(maps.Keys(r.Stats.Shards)) {
		sh := r.Stats.Shards[id]
		send(shardRecords, float64(sh.RecordsRead), src, id)
		send(shardBytes, float64(sh.BytesRead), src, id)
		hist(shardLatency, sh.ReadLatency, src, id)
		reading := 0.0
		if sh.Reading {
			// Only while read here: the lag of a shard whose reader
			// stopped (its lease moved, or it ended) stays at its last
			// read, which would show for ever beside the new owner's.
			reading = 1
			send(shardBehind, sh.Behind.Seconds(), src, id)
		}
		send(shardReading, reading, src, id)
		if sh.Checkpointed || sh.CheckpointCommits > 0 || sh.CheckpointFailures > 0 {
			send(cpCommits, float64(sh.CheckpointCommits), src, id)
			send(cpFailures, float64(sh.CheckpointFailures), src, id)
		}
		if lag, ok := r.CheckpointLag[id]; ok {
			send(cpLag, lag.Seconds(), src, id)
		}
	}
}

// constHistogram returns h as a Prometheus histogram: cumulative buckets,
// in seconds.
func constHistogram(d desc, h metrics.Histogram, labels []string) (prometheus.Metric, error) {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum int64
	for i, b := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		buckets[b.Seconds()] = uint64(max(cum, 0))
	}
	return prometheus.NewConstHistogram(d.d, uint64(max(h.Count(), 0)), h.Sum.Seconds(), buckets, labels...)
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
