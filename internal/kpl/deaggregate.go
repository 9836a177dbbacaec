package kpl

import (
	"bytes"
	"crypto/md5"
	"fmt"
)

// magic is the four bytes that start the data of every KPL aggregated record.
const magic = "\xF3\x89\x9A\xC2"

// digestLen is the length of the MD5 digest that ends an aggregated record.
const digestLen = md5.Size

// The protobuf field numbers of the aggregation format (see doc.go).
const (
	fieldPartitionKeyTable    = 1 // AggregatedRecord.partition_key_table
	fieldExplicitHashKeyTable = 2 // AggregatedRecord.explicit_hash_key_table
	fieldRecords              = 3 // AggregatedRecord.records

	fieldPartitionKeyIndex    = 1 // Record.partition_key_index
	fieldExplicitHashKeyIndex = 2 // Record.explicit_hash_key_index
	fieldData                 = 3 // Record.data
)

// UserRecord is one record from an aggregate, or the whole Kinesis record
// when it is not an aggregate.
type UserRecord struct {
	// PartitionKey is the user record's partition key. For a record that is
	// not an aggregate it is the Kinesis record's partition key.
	PartitionKey string
	// ExplicitHashKey is the user record's explicit hash key, a decimal
	// 128-bit number, or "" when the producer set none. Kinesis does not
	// return the explicit hash key of a plain record, so it is always ""
	// for a record that is not an aggregate.
	ExplicitHashKey string
	// Data is the user record's payload. Deaggregate returns slices of the
	// Kinesis record's data, not copies: keeping one user record keeps the
	// whole aggregate in memory, and changing the bytes changes them for
	// every holder. Appending to Data never overwrites a neighbour.
	Data []byte
	// SubSequence is the position of the user record in its aggregate,
	// from 0: with the Kinesis sequence number it identifies the user record,
	// as in the KCL's checkpoints. It is 0 for a record that is not an
	// aggregate. Aggregate ignores it.
	SubSequence int64
}

// Deaggregate splits the data of one Kinesis record, whose partition key is
// partitionKey, into its user records.
//
// Data that does not start with the KPL magic number, or is too short to hold
// it and a digest, is not an aggregate: Deaggregate returns one UserRecord
// holding partitionKey and data, aggregated false and a nil error.
//
// Data that starts with the magic number but whose digest does not match, or
// whose protobuf message is malformed, is returned the same way, as one
// UserRecord holding the data unchanged with aggregated false, but with a
// non-nil error of type [*FormatError] saying what is wrong. The caller is
// expected to deliver that record as it is and to count the error, as the KCL
// does for a wrong digest or a message it cannot parse (for a table index
// out of range it drops user records instead; see the package
// documentation).
//
// Otherwise Deaggregate returns the user records in the order of the
// aggregate, each with its SubSequence set to its index, and aggregated true.
// A valid aggregate may hold no user records, in which case recs is empty.
// Data fields alias data (see [UserRecord.Data]).
func Deaggregate(data []byte, partitionKey string) (recs []UserRecord, aggregated bool, err error) {
	if !MaybeAggregate(data) {
		return whole(data, partitionKey), false, nil
	}
	recs, err = decode(data)
	if err != nil {
		return whole(data, partitionKey), false, err
	}
	return recs, true, nil
}

// MaybeAggregate reports whether data starts like a KPL aggregate (the magic
// number, and room for the digest). When it is false, Deaggregate would
// return data whole, as the only user record, with aggregated false and no
// error: a caller converting many records may skip the call, and its
// allocation, for those.
func MaybeAggregate(data []byte) bool {
	return len(data) >= len(magic)+digestLen && string(data[:len(magic)]) == magic
}

// whole returns data as the only user record of a Kinesis record.
func whole(data []byte, partitionKey string) []UserRecord {
	return []UserRecord{{PartitionKey: partitionKey, Data: data}}
}

// decode checks the digest of an aggregate that starts with the magic number
// and decodes its protobuf message. It returns a *FormatError on any problem.
func decode(data []byte) ([]UserRecord, error) {
	bodyEnd := len(data) - digestLen
	body := data[len(magic):bodyEnd]
	sum := md5.Sum(body)
	if !bytes.Equal(sum[:], data[bodyEnd:]) {
		return nil, &FormatError{
			Kind:   ErrDigestMismatch,
			Offset: bodyEnd,
			Reason: fmt.Sprintf("MD5 of the %d protobuf bytes is %x, the record ends with %x", len(body), sum, data[bodyEnd:]),
		}
	}
	t, err := readTables(decoder{buf: body, base: len(magic)})
	if err != nil {
		return nil, err
	}
	return readRecords(decoder{buf: body, base: len(magic)}, &t)
}

// tables holds what the first pass over an AggregatedRecord learns: the two
// key tables and the number of records. Records may come before the tables
// in the message, so records are decoded in a second pass.
type tables struct {
	partitionKeys    []string
	explicitHashKeys []string
	records          int // the records long enough to be valid
}

// minRecordLen is the length of the shortest valid Record message: its two
// required fields, a one-byte tag and a one-byte value each.
const minRecordLen = 4

// readTables is the first pass: it checks that the top-level message is well
// formed, counts its fields, then collects the key tables. Every allocation
// is sized by the count of fields actually in the message, never by a number
// the message states; records too short to be valid are not counted, as
// decoding fails at the first of them.
func readTables(d decoder) (tables, error) {
	var n [fieldRecords + 1]int // by field number
	err := eachField(d, func(num int, b []byte, _ int) error {
		if num != fieldRecords || len(b) >= minRecordLen {
			n[num]++
		}
		return nil
	})
	if err != nil {
		return tables{}, err
	}
	t := tables{
		partitionKeys:    make([]string, 0, n[fieldPartitionKeyTable]),
		explicitHashKeys: make([]string, 0, n[fieldExplicitHashKeyTable]),
		records:          n[fieldRecords],
	}
	// The same walk again: it cannot fail.
	_ = eachField(d, func(num int, b []byte, _ int) error {
		switch num {
		case fieldPartitionKeyTable:
			t.partitionKeys = append(t.partitionKeys, string(b))
		case fieldExplicitHashKeyTable:
			t.explicitHashKeys = append(t.explicitHashKeys, string(b))
		}
		return nil
	})
	return t, nil
}

// eachField walks the top-level message and calls f with the value of each
// of its three fields (the key tables and the records) and the value's
// offset, in order. It skips unknown fields, and known ones of the wrong
// wire type, as protobuf does. It returns the first error of the walk or
// of f.
func eachField(d decoder, f func(num int, b []byte, at int) error) error {
	for !d.done() {
		num, wt, err := d.tag()
		if err != nil {
			return err
		}
		known := num == fieldPartitionKeyTable || num == fieldExplicitHashKeyTable || num == fieldRecords
		if !known || wt != wireBytes {
			if err := d.skip(num, wt); err != nil {
				return err
			}
			continue
		}
		b, err := d.bytes()
		if err != nil {
			return err
		}
		if err := f(num, b, d.offset()-len(b)); err != nil {
			return err
		}
	}
	return nil
}

// readRecords is the second pass: it decodes every record, in order, against
// the tables of the first pass, which has already checked the top level.
func readRecords(d decoder, t *tables) ([]UserRecord, error) {
	recs := make([]UserRecord, 0, t.records)
	err := eachField(d, func(num int, b []byte, at int) error {
		if num != fieldRecords {
			return nil
		}
		r, err := readRecord(decoder{buf: b, base: at}, t, len(recs))
		if err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// rawRecord is a Record message before its table indexes are resolved.
type rawRecord struct {
	pk, ehk     uint64
	pkAt, ehkAt int // offsets of the index fields; -1 when absent
	data        []byte
	hasData     bool
}

// scanRecord reads the fields of one Record message. When a field repeats,
// the last one wins, as in protobuf.
func scanRecord(d decoder) (rawRecord, error) {
	r := rawRecord{pkAt: -1, ehkAt: -1}
	for !d.done() {
		at := d.offset()
		num, wt, err := d.tag()
		if err != nil {
			return r, err
		}
		switch {
		case num == fieldPartitionKeyIndex && wt == wireVarint:
			r.pk, err = d.varint()
			r.pkAt = at
		case num == fieldExplicitHashKeyIndex && wt == wireVarint:
			r.ehk, err = d.varint()
			r.ehkAt = at
		case num == fieldData && wt == wireBytes:
			r.data, err = d.bytes()
			r.hasData = true
		default: // Tags (field 4) and unknown fields.
			err = d.skip(num, wt)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// readRecord decodes the Record message number index and resolves its table
// indexes.
func readRecord(d decoder, t *tables, index int) (UserRecord, error) {
	start := d.offset()
	r, err := scanRecord(d)
	switch {
	case err != nil:
		return UserRecord{}, err
	case r.pkAt < 0:
		return UserRecord{}, malformed(start, "record %d has no partition_key_index (field 1)", index)
	case !r.hasData:
		return UserRecord{}, malformed(start, "record %d has no data (field 3)", index)
	case r.pk >= uint64(len(t.partitionKeys)):
		return UserRecord{}, malformed(r.pkAt, "record %d: partition_key_index %d is out of range, the table has %d keys",
			index, r.pk, len(t.partitionKeys))
	case r.ehkAt >= 0 && r.ehk >= uint64(len(t.explicitHashKeys)):
		return UserRecord{}, malformed(r.ehkAt, "record %d: explicit_hash_key_index %d is out of range, the table has %d keys",
			index, r.ehk, len(t.explicitHashKeys))
	}
	u := UserRecord{PartitionKey: t.partitionKeys[r.pk], Data: r.data, SubSequence: int64(index)}
	if r.ehkAt >= 0 {
		u.ExplicitHashKey = t.explicitHashKeys[r.ehk]
	}
	return u, nil
}
