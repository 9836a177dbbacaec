package kinesis

import (
	"strconv"
	"testing"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/allocs"
	"github.com/weirstream/weir/internal/kpl"
)

// A user record takes at least minUserRecordBytes of its aggregate: the
// tag and length of its Record field, and the two required fields
// (partition_key_index and data), a tag and a byte each.
const minUserRecordBytes = 6

// allocPerPageByte is how many bytes convert may allocate per byte of the
// page it converts. A user record of minUserRecordBytes becomes a Record
// (128 bytes) after being a kpl.UserRecord (64 bytes): 32 bytes per byte,
// plus the decoder's key tables; a plain record becomes a Record from a
// types.Record of about the same size plus its data and strings.
const allocPerPageByte = 48

// allocSlack is what the runtime and the test itself may allocate besides
// convert while it is measured.
const allocSlack = 64 << 10

// pageBytes returns the memory a GetRecords page holds: its records and
// their data and strings.
func pageBytes(page []types.Record) int64 {
	n := int64(len(page)) * int64(unsafe.Sizeof(types.Record{}))
	for _, r := range page {
		n += int64(len(r.Data) + len(aws.ToString(r.PartitionKey)) + len(aws.ToString(r.SequenceNumber)))
	}
	return n
}

// maxConvertAlloc is the most convert may allocate for page.
func maxConvertAlloc(page []types.Record) uint64 {
	return uint64(allocPerPageByte*pageBytes(page)) + allocSlack
}

// denseAggregate returns a KPL aggregate of n user records of empty data,
// under one partition key: the most user records the fewest bytes hold.
func denseAggregate(n int) []byte {
	users := make([]kpl.UserRecord, n)
	for i := range users {
		users[i] = kpl.UserRecord{PartitionKey: "k", Data: []byte{}}
	}
	return kpl.Aggregate(users)
}

// hostilePage returns a page of the given records' data, with sequence
// numbers from 1.
func hostilePage(data ...[]byte) []types.Record {
	page := make([]types.Record, len(data))
	for i, d := range data {
		page[i] = krec(i+1, "")
		page[i].Data = d
	}
	return page
}

// repeat returns data followed by n copies of next.
func repeat(data []byte, n int, next []byte) [][]byte {
	out := [][]byte{data}
	for range n {
		out = append(out, next)
	}
	return out
}

// TestConvertAllocationBoundedByPage converts pages a producer can write to
// make the conversion reserve room for far more records than the page can
// hold (issue 17, item 1): what it allocates must stay within a small
// multiple of the page's bytes, and the records it returns must hold no
// room the byte budget does not count. Polling, fan-out and Recompute all
// convert their pages with convert.
func TestConvertAllocationBoundedByPage(t *testing.T) {
	tests := []struct {
		name string
		page []types.Record
	}{
		// About the page: 14 KB of data asked for 358 MB.
		{"dense aggregate, then many small records", hostilePage(repeat(denseAggregate(2000), 1400, []byte("x"))...)},
		{"1 MiB aggregate, then a few records", hostilePage(repeat(denseAggregate(170_000), 20, []byte("x"))...)},
		{"aggregates growing in size", func() []types.Record {
			var data [][]byte
			for i := range 200 {
				data = append(data, denseAggregate(i*5))
			}
			return hostilePage(data...)
		}()},
		{"plain records only", hostilePage(repeat([]byte("x"), 1000, []byte("y"))...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out []Record
			got := allocs.Bytes(func() { out, _ = convert("shard-1", tt.page, lowerHalf) })
			t.Logf("%d-byte page of %d records: %d user records, %d bytes allocated (%.1f per page byte)",
				pageBytes(tt.page), len(tt.page), len(out), got, float64(got)/float64(pageBytes(tt.page)))
			if limit := maxConvertAlloc(tt.page); got > limit {
				t.Errorf("convert of a %d-byte page of %d records allocated %d bytes, want at most %d",
					pageBytes(tt.page), len(tt.page), got, limit)
			}
			if cap(out) != len(out) {
				t.Errorf("convert returned %d records with room for %d: the byte budget counts only the records", len(out), cap(out))
			}
		})
	}
}

// TestConvertCountsUserRecords checks the records convert returns for the
// pages of TestConvertAllocationBoundedByPage: every user record, in order.
func TestConvertCountsUserRecords(t *testing.T) {
	page := hostilePage(repeat(denseAggregate(3), 2, []byte("x"))...)
	page = append(page, krec(4, ""))
	page[3].Data = denseAggregate(0) // an empty aggregate holds no user record
	out, conv := convert("shard-1", page, fullHashRange)
	var got []string
	for _, r := range out {
		got = append(got, r.SequenceNumber+"/"+strconv.FormatInt(r.SubSequenceNumber, 10))
	}
	want := []string{"1/0", "1/1", "1/2", "2/0", "3/0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("user records (-want +got):\n%s", diff)
	}
	if conv != (conversion{}) {
		t.Errorf("convert counted %+v, want nothing bad or out of range", conv)
	}
}
