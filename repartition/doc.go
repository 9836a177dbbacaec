// Package repartition repartitions a keyed stream by its key through a
// Kinesis stream, the distributed shuffle of a weir pipeline: ByKey writes
// every record to an intermediate stream with its key as partition key and
// continues the pipeline from that stream, read like any Kinesis source
// (with leases, on a fleet). After it, every record of a key is read from
// one shard, so stateful operators keyed by it run on a fleet.
//
// The repository's DESIGN.md ("Repartition") describes what is written
// and what holds on a fleet.
package repartition
