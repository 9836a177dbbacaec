package kpl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// equateEmpty compares Data with bytes.Equal, so that a nil Data equals an
// empty one (Aggregate accepts either, and Deaggregate returns an empty,
// non-nil slice), and large payloads compare fast.
var equateEmpty = cmp.Comparer(bytes.Equal)

// numbered returns records with SubSequence set to each one's index, as
// Deaggregate returns them.
func numbered(records []UserRecord) []UserRecord {
	out := make([]UserRecord, len(records))
	for i, r := range records {
		r.SubSequence = int64(i)
		out[i] = r
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	var many []UserRecord
	for i := range 300 {
		many = append(many, UserRecord{
			PartitionKey: fmt.Sprintf("key-%d", i%7),
			Data:         bytes.Repeat([]byte{byte(i)}, i),
		})
	}
	tests := []struct {
		name    string
		records []UserRecord
	}{
		{"none", nil},
		{"one", []UserRecord{{PartitionKey: "pk", Data: []byte("hello")}}},
		{"many with shared keys and multi-byte lengths", many},
		{"nil data", []UserRecord{{PartitionKey: "pk"}}},
		{"empty data", []UserRecord{{PartitionKey: "pk", Data: []byte{}}, {PartitionKey: "pk", Data: []byte("x")}}},
		{"empty partition key", []UserRecord{{Data: []byte("x")}}},
		{"shared partition keys", []UserRecord{
			{PartitionKey: "a", Data: []byte("1")},
			{PartitionKey: "b", Data: []byte("2")},
			{PartitionKey: "a", Data: []byte("3")},
		}},
		{"explicit hash keys", []UserRecord{
			{PartitionKey: "a", ExplicitHashKey: "340282366920938463463374607431768211455", Data: []byte("1")},
			{PartitionKey: "a", Data: []byte("2")},
			{PartitionKey: "b", ExplicitHashKey: "0", Data: []byte("3")},
			{PartitionKey: "c", ExplicitHashKey: "340282366920938463463374607431768211455", Data: []byte("4")},
		}},
		{"large data", []UserRecord{{PartitionKey: "big", Data: bytes.Repeat([]byte("ab"), 70000)}}},
		{"input sub-sequence ignored", []UserRecord{{PartitionKey: "a", Data: []byte("x"), SubSequence: 42}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := Aggregate(tt.records)
			if len(data) != cap(data) {
				t.Errorf("Aggregate allocated %d bytes for %d: its size estimate is wrong", cap(data), len(data))
			}
			recs, aggregated, err := Deaggregate(data, "outer")
			if err != nil || !aggregated {
				t.Fatalf("Deaggregate(Aggregate(...)) = aggregated %v, error %v; want true, nil", aggregated, err)
			}
			if diff := cmp.Diff(numbered(tt.records), recs, equateEmpty); diff != "" {
				t.Errorf("records differ (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAggregateDeduplicatesTables(t *testing.T) {
	data := Aggregate([]UserRecord{
		{PartitionKey: "a", ExplicitHashKey: "1"},
		{PartitionKey: "b"},
		{PartitionKey: "a", ExplicitHashKey: "2"},
		{PartitionKey: "b", ExplicitHashKey: "1"},
	})
	got, err := readTables(decoder{buf: data[len(magic) : len(data)-digestLen]})
	if err != nil {
		t.Fatalf("readTables: %v", err)
	}
	want := tables{partitionKeys: []string{"a", "b"}, explicitHashKeys: []string{"1", "2"}, records: 4}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(tables{})); diff != "" {
		t.Errorf("tables differ (-want +got):\n%s", diff)
	}
}

func TestDeaggregateNotAggregated(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"plain text", []byte("hello, world, this is longer than twenty bytes")},
		{"magic only", []byte(magic)},
		{"magic and 15 bytes", append([]byte(magic), make([]byte, digestLen-1)...)},
		{"three bytes of magic", append([]byte(magic[:3]), make([]byte, 40)...)},
		{"magic not at start", append([]byte{0}, frame(nil)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, aggregated, err := Deaggregate(tt.data, "pk")
			if err != nil || aggregated {
				t.Fatalf("Deaggregate = aggregated %v, error %v; want false, nil", aggregated, err)
			}
			want := []UserRecord{{PartitionKey: "pk", Data: tt.data}}
			if diff := cmp.Diff(want, recs); diff != "" {
				t.Errorf("records differ (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeaggregateHandBuilt decodes messages built field by field, with what
// the encoder never writes: tags, unknown fields of every wire type, fields
// out of the usual order and repeated scalar fields.
func TestDeaggregateHandBuilt(t *testing.T) {
	tag := func(k, v string) []byte { return bfield(4, pb(sfield(1, k), sfield(2, v))) }
	unknown := pb(
		vfield(9, 1<<63),
		fixed64field(10, 7),
		fixed32field(11, 7),
		sfield(12, "unknown"),
		group(13, vfield(1, 1), group(2, sfield(3, "nested")), fixed32field(4, 0)),
		group(536870911), // the largest field number, empty group
	)
	tests := []struct {
		name string
		body []byte
		want []UserRecord
	}{
		{
			name: "tags are skipped",
			body: pb(sfield(1, "pk"), bfield(3, pb(vfield(1, 0), tag("k", "v"), sfield(3, "data"), tag("k2", "")))),
			want: []UserRecord{{PartitionKey: "pk", Data: []byte("data")}},
		},
		{
			name: "tag with key only",
			body: pb(sfield(1, "pk"), bfield(3, pb(vfield(1, 0), sfield(3, "d"), bfield(4, sfield(1, "k"))))),
			want: []UserRecord{{PartitionKey: "pk", Data: []byte("d")}},
		},
		{
			name: "unknown fields at top level and in records",
			body: pb(unknown, sfield(1, "pk"), unknown, bfield(3, pb(unknown, vfield(1, 0), unknown, sfield(3, "d"), unknown)), unknown),
			want: []UserRecord{{PartitionKey: "pk", Data: []byte("d")}},
		},
		{
			name: "records before tables",
			body: pb(bfield(3, pb(sfield(3, "d"), vfield(2, 0), vfield(1, 1))), sfield(1, "a"), sfield(2, "99"), sfield(1, "b")),
			want: []UserRecord{{PartitionKey: "b", ExplicitHashKey: "99", Data: []byte("d")}},
		},
		{
			name: "repeated scalar fields: last wins",
			body: pb(sfield(1, "a"), sfield(1, "b"), bfield(3, pb(vfield(1, 0), sfield(3, "old"), vfield(1, 1), sfield(3, "new")))),
			want: []UserRecord{{PartitionKey: "b", Data: []byte("new")}},
		},
		{
			name: "known field with the wrong wire type is unknown",
			body: pb(vfield(1, 5), sfield(1, "pk"), bfield(3, pb(sfield(1, "x"), vfield(1, 0), vfield(3, 1), sfield(3, "d")))),
			want: []UserRecord{{PartitionKey: "pk", Data: []byte("d")}},
		},
		{
			name: "non-minimal varints",
			body: pb(sfield(1, "pk"), bfield(3, pb([]byte{0x88, 0x80, 0x00}, []byte{0x80, 0x80, 0x80, 0x00}, sfield(3, "d")))),
			want: []UserRecord{{PartitionKey: "pk", Data: []byte("d")}},
		},
		{
			name: "empty message",
			body: nil,
			want: []UserRecord{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, aggregated, err := Deaggregate(frame(tt.body), "outer")
			if err != nil || !aggregated {
				t.Fatalf("Deaggregate = aggregated %v, error %v; want true, nil", aggregated, err)
			}
			if diff := cmp.Diff(tt.want, recs, equateEmpty); diff != "" {
				t.Errorf("records differ (-want +got):\n%s", diff)
			}
		})
	}
}

// nested returns depth groups, each inside the one before.
func nested(depth int) []byte {
	if depth == 0 {
		return nil
	}
	return group(9, nested(depth-1))
}

// TestDeaggregateNestedGroups checks that groups nested as deep as
// maxGroupDepth are skipped like any unknown field.
func TestDeaggregateNestedGroups(t *testing.T) {
	data := frame(pb(sfield(1, "a"), nested(maxGroupDepth), bfield(3, pb(vfield(1, 0), sfield(3, "d")))))
	recs, aggregated, err := Deaggregate(data, "outer")
	want := []UserRecord{{PartitionKey: "a", Data: []byte("d")}}
	if err != nil || !aggregated {
		t.Fatalf("Deaggregate = aggregated %v, error %v; want true, nil", aggregated, err)
	}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestDeaggregateMalformed(t *testing.T) {
	// Offsets count from the start of the Kinesis record: the body starts
	// at 4, after the magic number.
	rec := func(fields ...[]byte) []byte { return bfield(3, pb(fields...)) }
	tests := []struct {
		name       string
		body       []byte
		wantOffset int
		wantReason string
	}{
		{"partition key index out of range", pb(sfield(1, "a"), rec(vfield(1, 1), sfield(3, "d"))), 4 + 3 + 2, "partition_key_index 1 is out of range, the table has 1 keys"},
		{"no partition key table", pb(rec(vfield(1, 0), sfield(3, "d"))), 4 + 2, "partition_key_index 0 is out of range, the table has 0 keys"},
		{"huge partition key index", pb(sfield(1, "a"), rec(vfield(1, 1<<64-1), sfield(3, "d"))), 4 + 3 + 2, "partition_key_index 18446744073709551615"},
		{"explicit hash key index out of range", pb(sfield(1, "a"), sfield(2, "1"), rec(vfield(1, 0), vfield(2, 1), sfield(3, "d"))), 4 + 6 + 2 + 2, "explicit_hash_key_index 1 is out of range, the table has 1 keys"},
		{"second record bad", pb(sfield(1, "a"), rec(vfield(1, 0), sfield(3, "d")), rec(vfield(1, 3), sfield(3, "d"))), 4 + 3 + 7 + 2, "record 1: partition_key_index 3"},
		{"record with a non-minimal length", pb(sfield(1, "a"), []byte{0x1A, 0x85, 0x00}, vfield(1, 3), sfield(3, "d")), 4 + 3 + 3, "record 0: partition_key_index 3"},
		{"missing partition key index", pb(sfield(1, "a"), rec(sfield(3, "d"))), 4 + 3 + 2, "record 0 has no partition_key_index"},
		{"missing data", pb(sfield(1, "a"), rec(vfield(1, 0))), 4 + 3 + 2, "record 0 has no data"},
		{"truncated tag", []byte{0x80}, 4, "truncated varint"},
		{"truncated varint value", []byte{0x08, 0xFF}, 4 + 1, "truncated varint"},
		{"varint overflow", pb([]byte{0x08}, bytes.Repeat([]byte{0xFF}, 9), []byte{0x02}), 4 + 1, "overflows 64 bits"},
		{"length past end", []byte{0x0A, 0x05, 'a', 'b'}, 4 + 1, "length 5 runs past the end of the message (2 bytes left)"},
		{"record length past end", []byte{0x1A, 0x02, 0x08}, 4 + 1, "length 2 runs past"},
		{"truncated inside record", pb(sfield(1, "a"), bfield(3, []byte{0x08, 0x00, 0x1A, 0x05, 'd'})), 4 + 3 + 2 + 3, "length 5 runs past"},
		{"wire type 6", []byte{0x0E}, 4, "invalid wire type 6 in field 1"},
		{"wire type 7 in record", pb(sfield(1, "a"), bfield(3, []byte{0x3F})), 4 + 3 + 2, "invalid wire type 7 in field 7"},
		{"field number 0", []byte{0x00, 0x00}, 4, "invalid field number 0"},
		{"field number too large", binary.AppendUvarint(nil, (maxFieldNumber+1)<<3), 4, "invalid field number 536870912"},
		{"truncated fixed64", pb(appendTag(nil, 9, wireFixed64), make([]byte, 7)), 4 + 1, "truncated 8-byte fixed value"},
		{"truncated fixed32", pb(appendTag(nil, 9, wireFixed32), make([]byte, 3)), 4 + 1, "truncated 4-byte fixed value"},
		{"end group without start", appendTag(nil, 9, wireEndGroup), 4 + 1, "end of group 9 that was never started"},
		{"unclosed group", appendTag(nil, 9, wireStartGroup), 4 + 1, "group 9 is not closed"},
		{"unclosed nested group", pb(appendTag(nil, 9, wireStartGroup), group(10)), 4 + 3, "group 9 is not closed"},
		{"mismatched end group", pb(appendTag(nil, 9, wireStartGroup), appendTag(nil, 10, wireEndGroup)), 4 + 1, "end of group 10 inside group 9"},
		{"bad field inside group", pb(appendTag(nil, 9, wireStartGroup), []byte{0x0F}), 4 + 1, "invalid wire type 7"},
		{"groups nested too deep", nested(maxGroupDepth + 1), 4 + maxGroupDepth, "groups nested more than 100 deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := frame(tt.body)
			recs, aggregated, err := Deaggregate(data, "outer")
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Deaggregate error = %v; want a *FormatError of kind ErrMalformed", err)
			}
			if aggregated {
				t.Errorf("aggregated = true; want false")
			}
			if fe.Offset != tt.wantOffset || !strings.Contains(fe.Reason, tt.wantReason) {
				t.Errorf("error at %d, %q; want at %d, containing %q", fe.Offset, fe.Reason, tt.wantOffset, tt.wantReason)
			}
			want := []UserRecord{{PartitionKey: "outer", Data: data}}
			if diff := cmp.Diff(want, recs); diff != "" {
				t.Errorf("passed-through record differs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeaggregateDigestMismatch(t *testing.T) {
	good := Aggregate([]UserRecord{{PartitionKey: "a", Data: []byte("data")}})
	tests := []struct {
		name string
		flip int // index of the byte to change
	}{
		{"protobuf byte", len(magic) + 2},
		{"first digest byte", len(good) - digestLen},
		{"last digest byte", len(good) - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := bytes.Clone(good)
			data[tt.flip] ^= 0x01
			recs, aggregated, err := Deaggregate(data, "outer")
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrDigestMismatch) || aggregated {
				t.Fatalf("Deaggregate = aggregated %v, error %v; want false and a *FormatError of kind ErrDigestMismatch", aggregated, err)
			}
			if fe.Offset != len(data)-digestLen {
				t.Errorf("Offset = %d; want %d, the start of the digest", fe.Offset, len(data)-digestLen)
			}
			want := []UserRecord{{PartitionKey: "outer", Data: data}}
			if diff := cmp.Diff(want, recs); diff != "" {
				t.Errorf("passed-through record differs (-want +got):\n%s", diff)
			}
		})
	}
}

// truncationInput is an aggregate with every kind of field the encoder
// writes, multi-byte lengths included.
func truncationInput() []UserRecord {
	return []UserRecord{
		{PartitionKey: "alpha", Data: []byte("one")},
		{PartitionKey: "beta", ExplicitHashKey: "12345", Data: bytes.Repeat([]byte("x"), 200)},
		{PartitionKey: "alpha", Data: nil},
		{PartitionKey: "gamma", ExplicitHashKey: "12345", Data: []byte("four")},
	}
}

// TestDeaggregateTruncatedRecord cuts a valid aggregate at every byte: the
// result must be a pass-through, with an error whenever the cut data still
// starts with the magic number and holds a digest.
func TestDeaggregateTruncatedRecord(t *testing.T) {
	full := Aggregate(truncationInput())
	for n := range len(full) {
		data := full[:n]
		recs, aggregated, err := Deaggregate(data, "outer")
		if aggregated {
			t.Fatalf("cut at %d: aggregated = true; want false", n)
		}
		if long := n >= len(magic)+digestLen; long != (err != nil) {
			t.Errorf("cut at %d: error %v; want an error only from %d bytes on", n, err, len(magic)+digestLen)
		}
		if diff := cmp.Diff([]UserRecord{{PartitionKey: "outer", Data: data}}, recs); diff != "" {
			t.Errorf("cut at %d: passed-through record differs (-want +got):\n%s", n, diff)
		}
	}
}

// TestDeaggregateTruncatedMessage cuts the protobuf message at every byte and
// frames it with a correct digest, to reach the decoder: a cut must be an
// ErrMalformed, except between two top-level fields, where the result must
// be the records before the cut.
func TestDeaggregateTruncatedMessage(t *testing.T) {
	want := numbered(truncationInput())
	full := Aggregate(want)
	body := full[len(magic) : len(full)-digestLen]
	valid := 0
	for n := range len(body) + 1 {
		recs, aggregated, err := Deaggregate(frame(body[:n]), "outer")
		if err != nil {
			if !errors.Is(err, ErrMalformed) || aggregated {
				t.Fatalf("cut at %d: aggregated %v, error %v; want false and ErrMalformed", n, aggregated, err)
			}
			continue
		}
		valid++
		if !aggregated || len(recs) > len(want) {
			t.Fatalf("cut at %d: aggregated %v with %d records; want true with at most %d", n, aggregated, len(recs), len(want))
		}
		if diff := cmp.Diff(want[:len(recs)], recs, equateEmpty); diff != "" {
			t.Errorf("cut at %d: records differ from a prefix (-want +got):\n%s", n, diff)
		}
	}
	// The cuts that parse are the ends of the top-level fields and the empty
	// message: 1 + 3 partition keys + 1 explicit hash key + 4 records.
	if valid != 9 {
		t.Errorf("%d cuts parsed; want 9", valid)
	}
}

func TestDeaggregateDataDoesNotOverlap(t *testing.T) {
	recs, _, err := Deaggregate(Aggregate([]UserRecord{{PartitionKey: "a", Data: []byte("one")}, {PartitionKey: "a", Data: []byte("two")}}), "")
	if err != nil {
		t.Fatal(err)
	}
	_ = append(recs[0].Data, "XXXXXXXXXXXX"...)
	if got := string(recs[1].Data); got != "two" {
		t.Errorf("after appending to record 0, record 1 data = %q; want %q", got, "two")
	}
}

func TestFormatError(t *testing.T) {
	err := error(malformed(12, "record %d has no data (field 3)", 2))
	if got, want := err.Error(), "kpl: malformed aggregate at byte 12: record 2 has no data (field 3)"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrDigestMismatch) {
		t.Errorf("errors.Is does not match the kind of %v", err)
	}
	wrapped := fmt.Errorf("shard-0001: %w", err)
	var fe *FormatError
	if !errors.As(wrapped, &fe) || fe.Offset != 12 {
		t.Errorf("errors.As(%v) = %v, %+v; want the FormatError at 12", wrapped, fe != nil, fe)
	}
}
