// Package prometheus exports a metrics.Collector's numbers to Prometheus:
// register the collector New returns and serve promhttp's handler on
// /metrics. It lives apart from package metrics so that only users who want
// Prometheus import its client library.
//
// The metric names, their units and labels are stable; they follow
// Prometheus's conventions (base units, seconds and bytes, as the last word
// of the name but for _total, which ends every counter; latencies as
// histograms, so that quantiles such as the p99 can be computed across
// workers with histogram_quantile). A counter is sent from 0, as soon as
// what it counts exists: retries by cause from the first scrape. Labels:
// stream is the receiver's Name (for Kinesis, kinesis.Config.Stream as
// given), the same after a restart; shard the shard ID; cause a retry
// cause (for Kinesis, a key of kinesis.Stats.Retries); how the way a
// lease was acquired; worker a lease
// owner's ID without the process ID and random suffix of a default one
// (leasetable.Config.WorkerID), so that a restart keeps its series.
//
// Histogram buckets: the batch delays from 10ms to 500s (1, 2.5, 5 in each
// decade), GetRecords latency from 5ms to 10s.
//
// Batches:
//
//	weir_batches_scheduled_total              counter  batches cut and queued
//	weir_batches_completed_total              counter  batches that ran, failed ones included
//	weir_batches_failed_total                 counter  batches that failed
//	weir_batches_pending                      gauge    batches queued, not started
//	weir_batch_input_records_total            counter  input records of completed batches
//	weir_batch_scheduling_delay_seconds       histogram batch time to start of its outputs
//	weir_batch_processing_time_seconds        histogram run time of a batch
//	weir_batch_total_delay_seconds            histogram batch time to completion
//	weir_batch_last_scheduling_delay_seconds  gauge    of the latest completed batch
//	weir_batch_last_processing_time_seconds   gauge    of the latest completed batch
//	weir_batch_last_total_delay_seconds       gauge    of the latest completed batch
//	weir_unbatched_records                    gauge    records read, in no batch yet
//	weir_unbatched_blocks                     gauge    blocks stored, in no batch yet
//	weir_output_retries_total{output}         counter  units of the output tried again after a failure
//	weir_output_quarantined_records_total{output} counter records sent to dead letters
//
// Shards (labels stream, shard):
//
//	weir_kinesis_records_read_total           counter  user records read (after KPL de-aggregation)
//	weir_kinesis_read_bytes_total             counter  bytes of Kinesis record data read
//	weir_kinesis_get_records_duration_seconds histogram GetRecords latency (successful calls)
//	weir_kinesis_behind_latest_seconds        gauge    MillisBehindLatest of the latest GetRecords; sent while the shard is read
//	weir_kinesis_shard_reading                gauge    1 while a reader runs for the shard
//
// A Kinesis shard's series, these and its checkpoint series, are sent until
// 10 minutes after the worker stopped reading it for good (its lease lost or
// handed off, or the shard finished: kinesis.Stats.Shards).
//
// Retries (labels stream, cause: every cause, from 0):
//
//	weir_kinesis_retries_total                counter  retried calls, of the shards' readers and on the stream
//
// Checkpoints (labels stream, shard):
//
//	weir_checkpoint_commits_total             counter  checkpoints written
//	weir_checkpoint_failures_total            counter  checkpoints that failed every attempt
//	weir_checkpoint_lag_seconds               gauge    how long the oldest completed record not yet checkpointed has waited; sent once the shard's first checkpoint was tried
//
// Leases:
//
//	weir_leases_held{stream}                  gauge    leases this worker holds
//	weir_lease_acquisitions_total{stream,how} counter  how: taken (unowned), expired, stolen
//	weir_leases_lost_total{stream}            counter  leases lost before their shard ended, not handed back
//	weir_leases_handed_back_total{stream}     counter  leases given up on purpose: at a drain, to a worker that asked, refused
//	weir_lease_table_leases{worker}           gauge    leases in the table by worker ("" unowned)
//	weir_lease_table_workers                  gauge    distinct owners in the table
//
// Recovery:
//
//	weir_recovery_batches_total               counter  batches recomputed after a restart
//	weir_recovery_ranges_replayed_total{stream} counter  sequence ranges re-read from Kinesis
//	weir_recovery_ranges_skipped_total{stream}  counter  unavailable ranges skipped
//
// Warnings:
//
//	weir_warnings_active{kind}                gauge    conditions warned about that still hold
package prometheus
