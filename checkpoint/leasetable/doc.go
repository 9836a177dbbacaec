// Package leasetable holds the settings of weir's leases and checkpoints:
// which worker processes each Kinesis shard, and how far, kept in a
// DynamoDB table laid out like the Kinesis Client Library's (KCL) lease
// table, so that several workers share a stream and a KCL application's
// table can be taken over as it is.
//
// A program sets one [Config] as kinesis.Config.Leases:
//
//	kinesis.Config{Stream: "words", App: "wordcount", Leases: &leasetable.Config{
//		StateDir: "/var/lib/wordcount/leases", // optional: fast restarts
//	}}
//
// The receiver then runs one worker's side of the lease protocol: it renews
// the leases it holds, takes expired ones, steals towards an even spread,
// starts a child shard only after its parents reached SHARD_END, and
// checkpoints what the pipeline completed every Config.CheckpointInterval.
// kinesis.Receiver.HeldLeases lists the leases a worker holds ([Lease]);
// metrics/kinesismetrics lists a whole table's for the status page and
// Prometheus.
//
// Guarantees: every write is a single-item write conditional on the
// lease's owner and counter, so a worker that lost a lease can never write
// its checkpoint again. A dead worker's leases are taken within about
// LeaseDuration + TakeInterval of its last renewal. Attributes the KCL
// writes and weir does not use are kept as they are, and an item that
// cannot be read as a lease is left alone and reported ([BadItemError])
// while every other shard goes on.
//
// The repository's DESIGN.md, section "Leases", describes the table layout,
// the protocol and its cost, the defaults compared with the KCL's, how a
// KCL application's checkpoints are read, and how a restarted worker gets
// its leases back (Config.StateDir).
package leasetable
