package kpl

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// golden is an aggregated record built by hand from the format description
// in doc.go, byte by byte, without running any encoder. A protobuf tag is
// (field number << 3 | wire type), wire type 2 for strings, bytes and
// sub-messages (followed by a varint length), 0 for varints.
//
// The protobuf message (33 bytes) is:
//
//	0A 01 61              partition_key_table[0] = "a"   (field 1, type 2)
//	0A 01 62              partition_key_table[1] = "b"
//	12 02 34 32           explicit_hash_key_table[0] = "42" (field 2, type 2)
//	1A 06                 records[0], 6 bytes           (field 3, type 2)
//	   08 00                 partition_key_index = 0     (field 1, type 0)
//	   1A 02 68 69           data = "hi"                 (field 3, type 2)
//	1A 06                 records[1], 6 bytes
//	   08 01                 partition_key_index = 1
//	   10 00                 explicit_hash_key_index = 0 (field 2, type 0)
//	   1A 00                 data = ""
//	1A 05                 records[2], 5 bytes
//	   08 00                 partition_key_index = 0
//	   1A 01 78              data = "x"
//
// The digest is the MD5 of those 33 bytes, computed outside Go with
//
//	printf '\x0A\x01\x61\x0A\x01\x62\x12\x02\x34\x32\x1A\x06\x08\x00\x1A\x02\x68\x69\x1A\x06\x08\x01\x10\x00\x1A\x00\x1A\x05\x08\x00\x1A\x01\x78' | md5sum
var golden = []byte{
	0xF3, 0x89, 0x9A, 0xC2, // magic
	0x0A, 0x01, 0x61,
	0x0A, 0x01, 0x62,
	0x12, 0x02, 0x34, 0x32,
	0x1A, 0x06, 0x08, 0x00, 0x1A, 0x02, 0x68, 0x69,
	0x1A, 0x06, 0x08, 0x01, 0x10, 0x00, 0x1A, 0x00,
	0x1A, 0x05, 0x08, 0x00, 0x1A, 0x01, 0x78,
	// MD5 9c85239078768cef3ff479abdcf42cf9
	0x9C, 0x85, 0x23, 0x90, 0x78, 0x76, 0x8C, 0xEF,
	0x3F, 0xF4, 0x79, 0xAB, 0xDC, 0xF4, 0x2C, 0xF9,
}

// goldenRecords are the user records golden holds.
var goldenRecords = []UserRecord{
	{PartitionKey: "a", Data: []byte("hi"), SubSequence: 0},
	{PartitionKey: "b", ExplicitHashKey: "42", Data: []byte{}, SubSequence: 1},
	{PartitionKey: "a", Data: []byte("x"), SubSequence: 2},
}

func TestGoldenDecode(t *testing.T) {
	recs, aggregated, err := Deaggregate(golden, "outer")
	if err != nil || !aggregated {
		t.Fatalf("Deaggregate(golden) = aggregated %v, error %v; want true, nil", aggregated, err)
	}
	if diff := cmp.Diff(goldenRecords, recs); diff != "" {
		t.Errorf("records differ (-want +got):\n%s", diff)
	}
}

func TestGoldenEncode(t *testing.T) {
	if got := Aggregate(goldenRecords); !bytes.Equal(got, golden) {
		t.Errorf("Aggregate(goldenRecords) =\n% X\nwant\n% X", got, golden)
	}
}
