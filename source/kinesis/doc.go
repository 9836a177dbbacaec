// Package kinesis is weir's Amazon Kinesis Data Streams source: a Receiver
// that reads every shard it is assigned with GetRecords and pushes the
// records in blocks that remember the sequence-number ranges they came from,
// so a lost block is recomputed by reading those ranges again, and no data
// write-ahead log is needed (the repository's DESIGN.md, "Recovery"; Spark's
// SPARK-9217).
//
// How a record travels:
//
//   - An Assigner (AllShards by default) lists the shards and starts one
//     reader goroutine per shard, a child shard only once its parents were
//     read to their end and every one of their records was stored.
//   - A reader loops GetRecords (Config.RecordsPerRead): while more
//     records wait (a full page, a page cut by the 10 MiB response limit,
//     or MillisBehindLatest > 0), again as soon as Config.MinReadInterval
//     passed since the last call started (200ms: the shard's 5 reads/s);
//     caught up or empty-handed, after Config.PollInterval. It backs off with
//     jitter on throttling, server and connection errors, refreshes an expired iterator after the last
//     sequence number it read, and de-aggregates KPL records.
//   - Each GetRecords result enters the block generator whole, with one
//     batch.SeqRange{Stream, Shard, First, Last, Count}.
//   - Once a block is pushed (stored), each of its shards' latest stored
//     sequence number advances to its range's Last, never before
//     (LatestStored); once the driver reports its batch completed, the
//     latest completed one does (LatestCompleted), and only that one is
//     checkpointed (see below). A shard read to its end is reported
//     through Config.OnShardEnd once all of it is stored.
//   - Recompute reads a block's ranges back, AT_SEQUENCE_NUMBER First up to
//     Last inclusive, and gives the same records in the same order.
//
// # Memory and read rate
//
// The records read and not yet completed are bounded in bytes
// (Config.MaxBufferedBytes, 64 MiB by default): readers wait, and never
// drop anything, while it is full, and ask for fewer records when room is
// short; the bytes come back when the driver completes their batch. The
// read rate can be capped per shard (Config.MaxRecordsPerSecond) and made
// to follow the rate at which the pipeline processes the records
// (Config.Backpressure, see RateConfig), so that a slow pipeline keeps its
// batches on time and leaves its backlog in Kinesis.
//
// # Leases and checkpoints
//
// With Config.Leases, several workers (processes) share the stream through
// a DynamoDB lease table in the Kinesis Client Library's layout (package
// checkpoint), and each shard's progress is checkpointed to it:
//
//   - A worker reads only the shards it holds leases on. A lease acquired
//     starts a reader after the lease's checkpoint (at it, for a KCL
//     application's: see below), or at the position it names (TRIM_HORIZON, LATEST, AT_TIMESTAMP with Config.AtTimestamp),
//     and never before Runtime.ResumeAfter (the driver's recovery log):
//     the greater of the two, compared as numbers. A SHARD_END lease is
//     never read again.
//   - Every LeaseConfig.CheckpointInterval, each held shard whose greatest
//     completed sequence number moved (BlocksCompleted: every output of
//     its batch succeeded and the driver logged the completion) is
//     committed, with a write conditional on the lease's owner and
//     counter; the same number is never written twice, and no new data is
//     no problem. Only completed numbers are checkpointed, with any
//     recovery log or none, a DynamoDB one included (guarantee G4): a
//     worker that takes a shard over reads its own recovery log, never the
//     one of the worker that stored the blocks, so a checkpoint past
//     stored but not completed records would lose them if that worker
//     never came back with its log (died for good, or restarted under
//     another log name or worker ID). Re-reading them from Kinesis costs
//     what reading another worker's log would.
//   - A lease lost (another worker took it, or it was not renewed in time)
//     stops its reader at once and is never checkpointed again (the zombie
//     rule). A reader also holds back what it reads while its lease has
//     not been renewed for LeaseDuration, so a paused process that
//     resumes delivers nothing from a shard another worker may own.
//   - A new owner of a shard reads it after the lease's checkpoint: every
//     record not yet completed is read again, so none is lost (G1).
//   - A shard read to its end is marked SHARD_END once all its records are
//     completed; only then do workers take its children's leases.
//   - Stop (graceful) stops the readers, pushes their blocks, waits (at
//     most LeaseDuration) for the driver to complete them, makes the last
//     checkpoints and hands every lease back, so other workers take them
//     at once. Cancelling Start's ctx stops at once: the leases are left
//     to expire after LeaseDuration.
//
// What a recovery log buys with leases: a worker restarted (on any
// machine, for a DynamoDB log) with the same log recomputes exactly the
// batches a crash interrupted (G2), and runs twice only those whose
// outputs had started (G3). That bound is one worker's. In a fleet, a
// lease that moves while its old owner has pending batches delivers
// records twice: the old owner, restarted with its log, recomputes its
// pending batches, and the new owner reads the same records again after
// the completed checkpoint; a lease that moves because its owner paused
// or stopped without draining does the same with the records stored but
// not completed. Each such record reaches the outputs of two batches, of
// two workers, under different batch times. Delivery in a fleet is at
// least once, beyond the single-worker G3 bound; an output that must be
// exactly once across workers needs its own key (the record's shard and
// sequence number), not the batch time. A graceful Stop avoids it: it
// completes what it stored before handing its leases back (unless that
// takes longer than LeaseDuration).
//
// A KCL application's table is taken over as it is. The two kinds of
// checkpoint mean different things, so weir tells them apart: every
// checkpoint weir writes also goes to a weirCheckpoint attribute of the
// lease item, which the KCL ignores and keeps
// (leasetable.Lease.WrittenByWeir).
//
//   - A checkpoint weir wrote (checkpoint equals weirCheckpoint, sub-sequence
//     0) covers whole Kinesis records: the shard is read AFTER it, and
//     nothing is delivered twice.
//   - Any other (a KCL application wrote it) covers the user records up to
//     (checkpoint, checkpointSubSequenceNumber), and the KCL resumes AT
//     the checkpoint, dropping those. weir reads AT it too: with a
//     sub-sequence number > 0, the user records of that KPL aggregate up to
//     it are left out (the block's range then counts fewer records than
//     it spans, and Recompute leaves them out the same way); with 0, the
//     record at the checkpoint is delivered again, whole: a plain record
//     the KCL application processed is delivered once more, and no user
//     record of an aggregate is lost (at least once, never a loss).
//
// A table written by a weir without the weirCheckpoint attribute reads as
// a KCL one: one record per shard is delivered again.
//
// # Enhanced fan-out
//
// With Config.FanOut, shard readers subscribe (SubscribeToShard) through a
// registered stream consumer instead of polling: Kinesis pushes each
// shard's records to this application alone, up to 2 MB/s per shard,
// without sharing the 5 GetRecords calls/s of the shard with other
// consumers. The consumer is found by name, registered if missing, awaited
// until ACTIVE, and kept when the receiver stops (see FanOutConfig for the
// de-registration policy). Everything downstream of the reader is the
// same: one block range per event, KPL de-aggregation, Recompute through
// GetRecords, leases, checkpoints, and children read after their parents.
//
// Without Config.Leases, every shard is read (AllShards), each after the
// greatest sequence number of it in the driver's recovery log
// (Runtime.ResumeAfter), so a restarted pipeline neither skips nor repeats
// what its log holds. Checkpoints and leases can still plug in by hand:
// Config.StartAfter supplies each shard's starting sequence number (the
// log's, when greater, wins), and a custom Assigner starts and stops shard
// readers one by one through its Control.
package kinesis
