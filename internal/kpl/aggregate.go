package kpl

import (
	"crypto/md5"
	"encoding/binary"
)

// Aggregate encodes records as the data of one KPL aggregated Kinesis record,
// in the format the KPL writes and the KCL and [Deaggregate] read: magic
// number, protobuf AggregatedRecord, MD5 digest.
//
// Partition keys and explicit hash keys are deduplicated into the tables in
// order of first use; a record whose ExplicitHashKey is "" gets no explicit
// hash key index. SubSequence is ignored: a user record's sub-sequence number
// is its position in records. With no records the result is a valid, empty
// aggregate.
//
// Aggregate does not enforce the Kinesis limits. The caller keeps the result,
// plus the partition key it is put with, within the 1 MiB record limit, and
// chooses that partition key (or explicit hash key), usually the first
// record's, since Kinesis routes the aggregate as a whole.
func Aggregate(records []UserRecord) []byte {
	var (
		pkTable, ehkTable []string
		pkIndex           = make(map[string]uint64)
		ehkIndex          = make(map[string]uint64)
		refs              = make([]recordRef, len(records))
		size              = len(magic) + digestLen
	)
	for i, r := range records {
		pk, isNew := intern(pkIndex, r.PartitionKey)
		if isNew {
			pkTable = append(pkTable, r.PartitionKey)
			size += fieldSize(len(r.PartitionKey))
		}
		refs[i] = recordRef{pk: pk}
		if r.ExplicitHashKey != "" {
			ehk, isNew := intern(ehkIndex, r.ExplicitHashKey)
			if isNew {
				ehkTable = append(ehkTable, r.ExplicitHashKey)
				size += fieldSize(len(r.ExplicitHashKey))
			}
			refs[i].ehk, refs[i].hasEHK = ehk, true
		}
		refs[i].size = refs[i].encodedSize(len(r.Data))
		size += fieldSize(refs[i].size)
	}

	out := make([]byte, 0, size)
	out = append(out, magic...)
	for _, k := range pkTable {
		out = appendString(out, fieldPartitionKeyTable, k)
	}
	for _, k := range ehkTable {
		out = appendString(out, fieldExplicitHashKeyTable, k)
	}
	for i, r := range records {
		out = appendTag(out, fieldRecords, wireBytes)
		out = binary.AppendUvarint(out, uint64(refs[i].size))
		out = appendTag(out, fieldPartitionKeyIndex, wireVarint)
		out = binary.AppendUvarint(out, refs[i].pk)
		if refs[i].hasEHK {
			out = appendTag(out, fieldExplicitHashKeyIndex, wireVarint)
			out = binary.AppendUvarint(out, refs[i].ehk)
		}
		out = appendBytes(out, fieldData, r.Data)
	}
	sum := md5.Sum(out[len(magic):])
	return append(out, sum[:]...)
}

// AggregateBase and UserRecordSize give the size of the data Aggregate
// returns for user records that all have one partition key of keyLen bytes
// and no explicit hash key: AggregateBase(keyLen) plus the UserRecordSize
// of each one's data length. A producer uses them to fill an aggregate up
// to the record limit without encoding it first.
func AggregateBase(keyLen int) int { return len(magic) + digestLen + fieldSize(keyLen) }

// UserRecordSize is the size one user record of dataLen bytes adds to an
// aggregate of one partition key; see AggregateBase.
func UserRecordSize(dataLen int) int { return fieldSize(recordRef{}.encodedSize(dataLen)) }

// recordRef is what Aggregate knows of one record before writing it: its
// table indexes and the size of its encoded Record message.
type recordRef struct {
	pk, ehk uint64
	hasEHK  bool
	size    int
}

// encodedSize returns the size of the Record message with these indexes and
// dataLen bytes of data. Every tag of the format fits in one byte.
func (r recordRef) encodedSize(dataLen int) int {
	n := 1 + varintLen(r.pk) + fieldSize(dataLen)
	if r.hasEHK {
		n += 1 + varintLen(r.ehk)
	}
	return n
}

// fieldSize returns the size of a length-delimited field with a one-byte tag
// and n bytes of value.
func fieldSize(n int) int { return 1 + varintLen(uint64(n)) + n }

// intern returns the index of key in index, adding it with the next free
// index if it is not there yet; isNew reports whether it was added.
func intern(index map[string]uint64, key string) (i uint64, isNew bool) {
	if i, ok := index[key]; ok {
		return i, false
	}
	i = uint64(len(index))
	index[key] = i
	return i, true
}
