// Package kinesistest is an in-process fake of Amazon Kinesis Data Streams
// for unit tests of weir pipelines, with no server, in virtual time (like
// franz-go's kfake for Kafka).
//
// A *Fake implements kinesis.Client, so a pipeline under test reads from it
// with kinesis.Config{Client: fake}. It keeps streams in memory:
//
//   - CreateStream, Put and PutMany: records go to shards by the MD5 hash of
//     their partition key over evenly split hash key ranges, as in Kinesis,
//     and get 56-digit sequence numbers that grow within each shard
//     (compare them with batch.CompareSeq).
//   - DescribeStreamSummary, ListShards (MaxResults, NextToken,
//     ExclusiveStartShardId), GetShardIterator (TRIM_HORIZON, LATEST,
//     AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER, AT_TIMESTAMP) and
//     GetRecords (Limit, MillisBehindLatest, ChildShards and a nil
//     NextShardIterator at the end of a closed shard), answering bad input
//     with the SDK's typed errors, as Kinesis does.
//   - Resharding at once: SplitShard, SplitShardAt and MergeShards close
//     their parents (EndingSequenceNumber set, records still readable) and
//     make children with ParentShardId and AdjacentParentShardId.
//   - Faults, deterministic: InjectThrottling (the next n calls of an
//     operation are throttled), ExpireIterators (every iterator issued so far
//     expires), Trim (records before a sequence number are gone, as after
//     the retention period), and Calls (calls per operation).
//
// Time is the injected clock's (WithClock; clock.Real{} by default, which is
// virtual inside a testing/synctest bubble): arrival timestamps,
// MillisBehindLatest, and the expiry of iterators (IteratorTTL, 5 minutes)
// and NextTokens. Iterators and tokens are opaque strings encoding the
// position, so one issued before a reshard or trim still reads right.
//
// What it does not fake: DynamoDB (leases and checkpoints, kinesis.Config's
// Leases, need dynalite or a real table); enhanced fan-out
// (RegisterStreamConsumer, SubscribeToShard); the producer API (PutRecord,
// PutRecords: tests put with Put and PutMany); UpdateShardCount; ListShards
// ShardFilter; the service's byte and call-rate limits (only injected
// throttling); KPL aggregation (a test may Put aggregated bytes itself);
// and the server-side delays of stream creation and resharding (streams are
// ACTIVE at once). Weir's own tests of its AWS paths run against real local
// servers; this fake is for the tests of pipelines built on weir.
package kinesistest
