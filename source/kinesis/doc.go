// Package kinesis is weir's Amazon Kinesis Data Streams source: a
// [Receiver] that reads the shards it is assigned and pushes their records
// in blocks that remember the sequence-number ranges they came from, so a
// lost block is recomputed by reading those ranges again ([Receiver.Recompute])
// and no data write-ahead log is needed.
//
// Start with:
//
//   - [New] and [Config]: the stream, the application name, and how to read
//     (polling with GetRecords, or enhanced fan-out with [FanOutConfig]).
//   - Config.Leases (a leasetable.Config): share the stream among several
//     workers through a DynamoDB lease table in the Kinesis Client
//     Library's layout, and checkpoint each shard to it (package
//     checkpoint/leasetable). A KCL application's table is taken over as
//     it is.
//   - [Record]: one user record, KPL aggregates de-aggregated.
//
// Guarantees: a shard is read in order, a child shard only after its
// parents were read to their end; throttling, server and connection errors
// are retried with back-off and an expired iterator resumes after the last
// record read. Only records of completed batches are checkpointed, so a
// worker that takes a shard over loses nothing (it may deliver again what
// the old owner had not completed). Memory is bounded by the pipeline's
// budget (stream.Config.MaxBufferedBytes; DESIGN.md "Memory and flow
// control"): a full buffer pauses reading, never drops.
//
// The repository's DESIGN.md says more: section "Data flow" for reading,
// pacing, memory and enhanced fan-out; "Recovery" for Recompute and where a
// restarted reader resumes; "Leases" for the lease table, where a leased
// shard starts, the KCL checkpoint rules and graceful Stop; "Failure model"
// for what each fault does.
package kinesis
