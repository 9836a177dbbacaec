package kinesis

import (
	"time"

	"github.com/weirstream/weir/source"
)

var _ source.Positioned = (*Record)(nil)

// Record is one user record read from a Kinesis stream. A Kinesis record
// written by the Kinesis Producer Library as an aggregate gives one Record
// per user record it holds, all with its SequenceNumber and each with its own
// SubSequenceNumber.
type Record struct {
	// Data is the record's payload. Records of one aggregate share its
	// memory: treat Data as read-only.
	Data []byte
	// PartitionKey is the record's partition key.
	PartitionKey string
	// ExplicitHashKey is the explicit hash key of a user record of an
	// aggregate, when its producer set one; "" otherwise.
	ExplicitHashKey string
	// SequenceNumber is the Kinesis sequence number of the record (of its
	// aggregate, for a user record of one): a decimal string of up to 128
	// bits; compare with batch.CompareSeq.
	SequenceNumber string
	// SubSequenceNumber is the position of the user record in its
	// aggregate, from 0; 0 for a record that is not an aggregate.
	SubSequenceNumber int64
	// Aggregated reports whether the record came out of a KPL aggregate.
	Aggregated bool
	// ApproximateArrivalTimestamp is when Kinesis accepted the record.
	ApproximateArrivalTimestamp time.Time
	// ShardID is the shard the record was read from.
	ShardID string
}

// Position returns the record's SequenceNumber and SubSequenceNumber: a
// Record is a source.Positioned, so a pipeline's ForEachBatch output
// declared with stream.Origins sees each record's origin.
func (r *Record) Position() (seq string, subSeq int64) { return r.SequenceNumber, r.SubSequenceNumber }
