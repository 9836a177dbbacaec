package checkpoint

// Stats is a snapshot of a worker's checkpoint counters, totals and per
// shard (every shard whose lease it held since it started, but those it
// stopped reading more than 10 minutes ago: kinesis.Stats.Shards), as
// kinesis.Receiver.CheckpointStats returns them.
type Stats struct {
	// Commits, Skips, Retries and Failures are the sums of the shards'
	// counters of the same names (see ShardStats), the shards no longer in
	// Shards included: they only grow.
	Commits, Skips, Retries, Failures int64
	// Shards holds each shard's counters, keyed by shard ID.
	Shards map[string]ShardStats
}

// ShardStats counts the checkpoints of one shard.
type ShardStats struct {
	// Registered reports whether the shard is checkpointed on the interval
	// now: this worker holds its lease and reads it.
	Registered bool
	// Committed is the last checkpoint written, or found in the lease when
	// it was taken; "" if none. It is a sequence number, or one of the
	// positions the Kinesis Client Library writes in its place:
	// "TRIM_HORIZON", "LATEST", "AT_TIMESTAMP", or "SHARD_END" once the
	// shard was read to its end and every record of it processed.
	Committed string
	// Commits counts successful writes.
	Commits int64
	// Skips counts checkpoint rounds with nothing newer to write (no new
	// completed record since the last commit).
	Skips int64
	// Retries counts failed attempts that were retried.
	Retries int64
	// Failures counts commits that failed after every attempt (a commit
	// abandoned because the receiver stopped is not counted). A failed
	// checkpoint is not fatal: after a restart or a change of owner, more
	// records are read again.
	Failures int64
}
