// Package kinesis is weir's Amazon Kinesis Data Streams source: a Receiver
// that reads every shard it is assigned with GetRecords and pushes the
// records in blocks that remember the sequence-number ranges they came from,
// so a lost block is recomputed by reading those ranges again, and no data
// write-ahead log is needed (DESIGN.md; Spark's SPARK-9217).
//
// How a record travels:
//
//   - An Assigner (AllShards by default) lists the shards and starts one
//     reader goroutine per shard, a child shard only once its parents were
//     read to their end and every one of their records was stored.
//   - A reader loops GetRecords (Config.RecordsPerRead): while behind the
//     tip of its shard, again as soon as Config.MinReadInterval passed
//     since the last call started (200ms: the shard's 5 reads/s); caught
//     up or empty-handed, after Config.PollInterval. It backs off with
//     jitter on throttling, server and connection errors, refreshes an expired iterator after the last
//     sequence number it read, and de-aggregates KPL records.
//   - Each GetRecords result enters the block generator whole, with one
//     batch.SeqRange{Stream, Shard, First, Last, Count}.
//   - Once a block is pushed (stored), each of its shards' latest stored
//     sequence number advances to its range's Last, never before:
//     LatestStored is what a checkpointer may record. A shard read to its
//     end is reported through Config.OnShardEnd once all of it is stored.
//   - Recompute reads a block's ranges back, AT_SEQUENCE_NUMBER First up to
//     Last inclusive, and gives the same records in the same order.
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
//   - Every LeaseConfig.CheckpointInterval, each held shard whose safe
//     number moved is committed, with a write conditional on the lease's
//     owner and counter; the same number is never written twice, and no
//     new data is no problem. The safe number (guarantee G4) is the
//     greatest completed one (BlocksCompleted: every output of its batch
//     succeeded), or, when Runtime.SharedLog says every stored block is in
//     a log any worker can read, the greatest stored one.
//   - A lease lost (another worker took it, or it was not renewed in time)
//     stops its reader at once and is never checkpointed again (the zombie
//     rule). A reader also holds back what it reads while its lease has
//     not been renewed for LeaseDuration, so a paused process that
//     resumes delivers nothing from a shard another worker may own.
//     Records stored before the loss but not completed are read again by
//     the new owner: delivery is at least once.
//   - A shard read to its end is marked SHARD_END once all its records are
//     completed; only then do workers take its children's leases.
//   - Stop (graceful) stops the readers, pushes their blocks, waits (at
//     most LeaseDuration) for the driver to complete them, makes the last
//     checkpoints and hands every lease back, so other workers take them
//     at once. Cancelling Start's ctx stops at once: the leases are left
//     to expire after LeaseDuration.
//
// A KCL application's table is taken over as it is. The two kinds of
// checkpoint mean different things, so weir tells them apart: every
// checkpoint weir writes also goes to a weirCheckpoint attribute of the
// lease item, which the KCL ignores and keeps
// (checkpoint.Lease.WrittenByWeir).
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
// Without Config.Leases, every shard is read (AllShards), each after the
// greatest sequence number of it in the driver's recovery log
// (Runtime.ResumeAfter), so a restarted pipeline neither skips nor repeats
// what its log holds. Checkpoints and leases can still plug in by hand:
// Config.StartAfter supplies each shard's starting sequence number (the
// log's, when greater, wins), and a custom Assigner starts and stops shard
// readers one by one through its Control.
package kinesis
