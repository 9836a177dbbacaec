// Package checkpoint records how far each Kinesis shard has been processed:
// the Checkpointer commits, on a fixed interval, the latest *safe* sequence
// number of every registered shard (Config.Latest: for weir's Kinesis
// receiver, the latest record of a completed batch) through a Committer,
// whether or not new records arrived, and never the same number twice (the
// interval checkpointer of Spark's SPARK-11359). It is independent of the
// Kinesis client and of where checkpoints are kept: shards are plain IDs,
// positions plain sequence-number strings.
//
// The DynamoDB lease table, laid out like the Kinesis Client Library's,
// and the Coordinator that runs one worker's side of the lease protocol
// (and is the Committer writing its checkpoints) are in package leasetable.
// The repository's DESIGN.md describes how checkpoints keep guarantee G4.
package checkpoint
