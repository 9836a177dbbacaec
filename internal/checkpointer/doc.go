// Package checkpointer is the interval checkpointer: it commits, on a fixed
// interval, the latest safe sequence number of every registered shard
// (Config.Latest: for weir's Kinesis receiver, the latest record of a
// completed batch) through a Committer, whether or not new records
// arrived, and never the same number twice (Spark's SPARK-11359). It is
// independent of the Kinesis client and of where checkpoints are kept:
// shards are plain IDs, positions plain sequence-number strings. The
// Kinesis receiver runs one per worker, its Committer the lease
// coordinator of internal/lease; package checkpoint holds the counters it
// reports (checkpoint.Stats).
package checkpointer
