package source

import "context"

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

// ShardLineage is implemented by a receiver that knows the ancestors of the
// shards it reads (the shards a reshard split or merged into them, and
// theirs), such as weir's Kinesis receiver with leases, whose leases and
// shard list name them. The driver gives its outputs the means to ask,
// through the context of their calls: sink/dynamodb skips an ancestor
// shard's late write over an item a descendant wrote.
type ShardLineage interface {
	// ShardAncestors returns, by shard ID, the ancestor shard IDs of the
	// shards of stream the receiver reads now and knows parents of, each
	// shard's nearest first (its parents, then theirs, and so on), or nil.
	// The driver asks once per stream and batch; the result is the
	// caller's.
	ShardAncestors(stream string) map[string][]string
}

// Shard names one shard of a stream and its hash key range, as Kinesis's
// ListShards gives it (decimal strings): the keys whose partition key's MD5
// falls in the range are read from the shard.
type Shard struct {
	Stream          string
	ID              string
	StartingHashKey string
	EndingHashKey   string
}

// ShardState is the driver's side of state kept per shard, which a
// ShardSharer receiver is given in Runtime.ShardState when the pipeline's
// stateful operators on its records keep their state by the shard each key
// is read from (stream.PartitionedBy; DESIGN.md, "State per shard"): the
// receiver stores each shard's state where every worker reads it, so that
// the state moves with the shard.
//
// The receiver must call Load for a shard before it pushes any of the
// shard's records, and Drop once it stops reading the shard for good
// (its lease lost or handed off): the driver keeps the state of the keys of
// the shards loaded, and leaves out of the state the records of any other
// shard. A receiver that stores a last snapshot of a shard it stops reading
// (a hand-off, a drain, a shard's end) takes it with
// ShardStateHandOver.SnapshotAndDrop if the ShardState implements it, as
// weir's driver does. A receiver that checkpoints a shard must not checkpoint past the
// position (upTo) of the last snapshot it stored, so that a successor that
// loads the snapshot and reads after the checkpoint or the snapshot,
// whichever is later, sees every record once in the state.
//
// The methods are safe for concurrent use; each waits for the batch
// running, if any, to complete.
type ShardState interface {
	// Shape identifies the pipeline's operators keeping state per shard
	// and their encoding: a snapshot of another shape must not be loaded.
	Shape() string
	// Snapshot returns the encoded state of the shard's keys after the
	// last completed batch, and the greatest sequence number of the
	// shard's records in completed batches, which the state reflects
	// ("" if none completed since the shard was loaded: the state is the
	// one loaded). It returns an error, and no state, once a batch failed
	// (or the Run stopped in it) after its stateful operators ran: the
	// state then holds records past the last completed batch.
	Snapshot(ctx context.Context, shard Shard) (data []byte, upTo string, err error)
	// Load replaces the state of the shard's keys with the state of those
	// keys in each of data: the shard's own snapshot, or, for a shard made
	// by a split or a merge, its parents' (each restricted to the shard's
	// hash key range). No data loads an empty state.
	Load(ctx context.Context, shard Shard, data ...[]byte) error
	// Drop forgets the state of the shard's keys.
	Drop(ctx context.Context, shard Shard) error
}

// ShardStateHandOver is implemented by a ShardState that takes a shard's
// last snapshot and drops the shard's state in one step, as weir's driver
// does. Between a Snapshot and a Drop the driver's batches still run over
// the shard's keys: a key a StateTimeout or an update returning keep false
// removes there, after the snapshot, is in the snapshot the shard's next
// owner loads, which times it out or closes it again, its function called
// and its output given twice. A receiver storing the last snapshot of a
// shard it stops reading for good (a hand-off, a drain, a shard's end)
// takes it with SnapshotAndDrop instead, and needs no Drop after it.
type ShardStateHandOver interface {
	// SnapshotAndDrop returns what Snapshot returns and, with no batch
	// between, forgets the shard's state as Drop does: the batches after
	// it leave the shard's keys out, as those of a shard not loaded. On
	// an error it drops nothing.
	SnapshotAndDrop(ctx context.Context, shard Shard) (data []byte, upTo string, err error)
}
