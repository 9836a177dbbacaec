// Package checkpoint describes how far each Kinesis shard has been
// processed, as the Kinesis receiver reports it
// (kinesis.Receiver.CheckpointStats returns a [Stats]).
//
// With leases (kinesis.Config.Leases, a leasetable.Config), every worker
// commits, every CheckpointInterval, the latest *safe* sequence number of
// each shard it holds — the latest record of a completed batch — to the
// shard's lease in the lease table, whether or not new records arrived, and
// never the same number twice (the interval checkpointer of Spark's
// SPARK-11359). A worker that takes a shard over, or restarts, reads after
// the checkpoint. A graceful Stop and a shard's end always checkpoint last.
//
// A checkpoint, here and in packages leasetable and kinesis, is this
// position of a shard in the lease table. The state of stateful operators
// is saved otherwise, in snapshots beside the recovery log, at the pace of
// stream.Config.StateSnapshotInterval (what Spark calls a state
// checkpoint).
//
// The lease settings, including CheckpointInterval, are in package
// leasetable. The repository's DESIGN.md describes how checkpoints keep
// guarantee G4 (sections Data flow and Leases).
package checkpoint
