// Package kpl reads and writes the record aggregation format of the Kinesis
// Producer Library (KPL).
//
// The KPL packs many small user records into one Kinesis record to use the
// per-shard throughput better. Such a record's data is laid out as
//
//	+----------------------+---------------------------+------------------+
//	| magic F3 89 9A C2    | protobuf AggregatedRecord | MD5 of protobuf  |
//	| 4 bytes              | N bytes                   | 16 bytes         |
//	+----------------------+---------------------------+------------------+
//
// where the protobuf message (proto2) is
//
//	message AggregatedRecord {
//	  repeated string partition_key_table     = 1;
//	  repeated string explicit_hash_key_table = 2;
//	  repeated Record records                 = 3;
//	}
//	message Record {
//	  required uint64 partition_key_index     = 1;
//	  optional uint64 explicit_hash_key_index = 2;
//	  required bytes  data                    = 3;
//	  repeated Tag    tags                    = 4;
//	}
//	message Tag {
//	  required string key   = 1;
//	  optional string value = 2;
//	}
//
// Partition keys and explicit hash keys are stored once each in the tables
// and referred to by index from every record.
//
// [Deaggregate] splits a Kinesis record into its user records, giving each
// its position in the aggregate as its sub-sequence number, the same numbering
// the Kinesis Client Library uses in its checkpoints. A record that is not an
// aggregate is passed through unchanged. A record that starts with the magic
// number but is damaged (wrong digest, malformed protobuf) is also passed
// through unchanged, together with a [*FormatError], so the caller can
// deliver it as it is and count it, and no data is lost. The KCL does the
// same for a wrong digest or a message protobuf cannot parse, but for a
// table index out of range it logs the aggregate and drops its user records
// from the bad one on (AggregatorUtil.deaggregate): weir passes that record
// through whole too.
// [Aggregate] is the encoder, for the Kinesis sink, tests and
// benchmarks; [AggregateBase] and [UserRecordSize] size an aggregate before
// it is encoded.
//
// The protobuf is decoded by hand: it is three small messages, and a
// hand-written decoder needs no code generation and no dependency. Unknown
// fields of every wire type, including groups (nested up to 100 deep), are
// skipped, so a producer that adds fields does not break the reader. Tags
// are skipped: weir has no use for them. Every allocation is sized by the
// bytes of the record, never by a count or length the record states.
//
// Everything in this package is a pure function of its arguments and is safe
// for concurrent use.
package kpl
