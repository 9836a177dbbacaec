// Package origin is the origin tag weir puts on the records it writes to a
// Kinesis stream (sink/kinesis), and the bounded deduplication a reader of
// that stream applies to them, so that weir → Kinesis → weir delivers each
// record once although a replayed batch writes it again.
//
// A tagged record's data is an envelope (see [Append]): the magic bytes
// F6 'w' 'e' 'i' 'r', a version byte (1), the writer's name, the batch time
// and the record's index in its batch, then the payload. 0xF6 never occurs
// in UTF-8, so text and JSON payloads are never mistaken for a tag. A batch
// recomputed after a crash has the same time and the same records in the
// same order (guarantee G2 in the repository's DESIGN.md), so each of its
// records gets the same tag again.
//
// The writer sends the record at index m of a batch only once every record
// before index m-[Window]+1 was acknowledged by Kinesis (a sliding window,
// see [Window]). A [Filter] keeps, per writer, the batch time, the greatest
// index seen and which of the last Window indexes were seen: a record is a
// duplicate if its index was seen, or if it is Window or more below the
// greatest. It never drops a record it has no proof of having seen, so a
// first copy that arrives after later records of its batch (a PutRecords
// retry) is kept.
//
// Version 1 identifies a record by its writer's batch, which holds for one
// worker replaying its own batches but not for a fleet, where a lease that
// moves has another worker write the same source records in batches of its
// own. A version 2 tag (the same magic, version byte 2) names the record's
// origin instead, the same whoever writes it: the source shard, the source
// record's sequence and sub-sequence numbers, the record's index among
// those its source record produced, and the first sequence number of the
// writing batch's range of that shard. A Filter drops version 2 copies
// exactly across takeovers, zombies and replays (see Filter.keepV2 for the
// argument). sink/kinesis writes version 2 for a batch with origins
// (stream.Origins), version 1 otherwise.
//
// Everything here is a pure function of its arguments, except a Filter,
// which is not safe for concurrent use.
package origin
