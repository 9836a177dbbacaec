package leasetable

// Lease is one shard's lease as a worker last read or wrote it
// (kinesis.Receiver.HeldLeases), with the attributes of the lease table
// item a user may want to see; the table's layout is described in
// DESIGN.md, section Leases.
type Lease struct {
	// Shard is the shard ID (leaseKey, the hash key).
	Shard string
	// Owner is the worker holding the lease (leaseOwner), "" if none.
	Owner string
	// Counter is the lease's version (leaseCounter): every write adds one,
	// and every write is conditional on the value last seen.
	Counter int64
	// Checkpoint is how far the shard is processed (checkpoint): a
	// sequence number, or a position the Kinesis Client Library writes in
	// its place: "TRIM_HORIZON", "LATEST", "AT_TIMESTAMP", or
	// "SHARD_END" once the shard was read to its end and every record of
	// it processed.
	Checkpoint string
	// SubSequence is the KPL sub-record within Checkpoint
	// (checkpointSubSequenceNumber); weir writes 0. A checkpoint a KCL
	// application wrote covers the user records at Checkpoint up to and
	// including this sub-sequence number.
	SubSequence int64
	// Parents are the shard's parent shard IDs (parentShardId): none, one,
	// or two after a merge. A shard's lease is taken only once its
	// parents' checkpoints are at SHARD_END.
	Parents []string
}
