package source

// ShardSharer is implemented by a receiver that may share its stream with
// other worker processes, each reading the shards it holds at the moment,
// such as weir's Kinesis receiver with leases. The driver asks before it
// starts the receiver: a stateful operator on such a receiver's records
// would keep, on each worker, the state of only the records that worker
// read (stream.ErrSplitState says what the driver does about it).
type ShardSharer interface {
	// SharesShards reports whether the receiver reads only the shards it
	// is given among workers sharing the stream, which may move to another
	// worker while it runs. A receiver that reads every shard of its
	// stream, or a fixed part no other worker reads, returns false.
	SharesShards() bool
}
