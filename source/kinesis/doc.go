// Package kinesis is weir's Amazon Kinesis Data Streams source: a Receiver
// that reads every shard it is assigned with GetRecords and pushes the
// records in blocks that remember the sequence-number ranges they came from,
// so a lost block is recomputed by reading those ranges again, and no data
// write-ahead log is needed (DESIGN.md; Spark's SPARK-9217).
//
// How a record travels:
//
//   - An Assigner (AllShards by default) lists the shards and starts one
//     reader goroutine per shard, a child shard only once its parents were
//     read to their end and every one of their records was stored.
//   - A reader loops GetRecords (Config.RecordsPerRead, every
//     Config.PollInterval), backs off with jitter on throttling, server and
//     connection errors, refreshes an expired iterator after the last
//     sequence number it read, and de-aggregates KPL records.
//   - Each GetRecords result enters the block generator whole, with one
//     batch.SeqRange{Stream, Shard, First, Last, Count}.
//   - Once a block is pushed (stored), each of its shards' latest stored
//     sequence number advances to its range's Last, never before:
//     LatestStored is what a checkpointer may record. A shard read to its
//     end is reported through Config.OnShardEnd once all of it is stored.
//   - Recompute reads a block's ranges back, AT_SEQUENCE_NUMBER First up to
//     Last inclusive, and gives the same records in the same order.
//
// Checkpoints and leases plug in without changing the receiver:
// Config.StartAfter supplies each shard's starting sequence number, and a
// custom Assigner starts and stops shard readers one by one through its
// Control.
package kinesis
