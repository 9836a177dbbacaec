package kpl

import (
	"bytes"
	"testing"

	"github.com/weirstream/weir/internal/allocs"
)

// allocPerByte is how many bytes Deaggregate may allocate per byte of the
// record it splits. A user record takes at least 6 bytes (its field's tag
// and length, and its two required fields) and becomes a 64-byte
// UserRecord; a key takes at least 2 bytes (tag and length) and becomes a
// 16-byte string header in its table.
const allocPerByte = 16

// TestDeaggregateAllocationBounded splits aggregates a producer can write
// to make the decoder allocate for more keys or records than they hold
// (issue 17, item 1): what Deaggregate allocates must stay within a small
// multiple of the bytes it is given.
func TestDeaggregateAllocationBounded(t *testing.T) {
	const n = 200_000
	validRecord := bfield(fieldRecords, pb(vfield(fieldPartitionKeyIndex, 0), sfield(fieldData, "")))
	tests := []struct {
		name string
		body []byte
	}{
		{"empty partition keys", pb(bytes.Repeat(sfield(fieldPartitionKeyTable, ""), n), validRecord)},
		{"empty explicit hash keys", pb(sfield(fieldPartitionKeyTable, "k"), bytes.Repeat(sfield(fieldExplicitHashKeyTable, ""), n), validRecord)},
		{"empty records", pb(sfield(fieldPartitionKeyTable, "k"), bytes.Repeat(sfield(fieldRecords, ""), n))},
		{"records too short to be valid", pb(sfield(fieldPartitionKeyTable, "k"), bytes.Repeat(bfield(fieldRecords, vfield(fieldPartitionKeyIndex, 0)), n))},
		{"deeply nested groups", pb(sfield(fieldPartitionKeyTable, "k"), bytes.Repeat(appendTag(nil, 9, wireStartGroup), n))},
		{"valid records", pb(sfield(fieldPartitionKeyTable, "k"), bytes.Repeat(validRecord, n))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := frame(tt.body)
			got := allocs.Bytes(func() { _, _, _ = Deaggregate(data, "outer") })
			t.Logf("%d bytes: %d bytes allocated (%.1f per byte)", len(data), got, float64(got)/float64(len(data)))
			if limit := uint64(allocPerByte*len(data)) + 64<<10; got > limit {
				t.Errorf("Deaggregate of %d bytes allocated %d bytes, want at most %d", len(data), got, limit)
			}
		})
	}
}
