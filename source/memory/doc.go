// Package memory is an in-process queue source: records a program pushes are
// delivered to a weir pipeline in blocks, exactly like records read from
// Kinesis, with sequence ranges that Recompute can replay. It is meant for
// tests, examples and the unit tests of users' pipelines, and as the embedded
// default source.
//
// Every record gets a synthetic position: the stream is Config.Name, the
// shard one of Config.Shards synthetic shards named like Kinesis shards
// ("shardId-000000000000"), and the sequence number its decimal offset in
// that shard, starting at 1. The records of one Push or Send call go to one
// shard, the calls taking the shards in turn, so each call is one range of
// its block.
//
// A Source keeps what was pushed (the latest Config.Retain records per shard,
// or all of them) so that Recompute can rebuild any block it pushed, in the
// same order, after the block store lost it.
package memory
