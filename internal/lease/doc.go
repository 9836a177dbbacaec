// Package lease is weir's side of the Kinesis Client Library's lease
// protocol: the DynamoDB lease table (Table: one item per shard, laid out
// like the KCL's, every write conditional on owner and counter) and one
// worker's side of the protocol (Coordinator: beats, renewals, takes,
// balance, graceful hand-off, shard ends, the state directory). The
// Kinesis receiver wires a Coordinator and an internal/checkpointer
// Checkpointer when kinesis.Config.Leases is set; the settings a user
// writes are checkpoint/leasetable's Config. The repository's DESIGN.md,
// section "Leases", describes the protocol.
package lease
