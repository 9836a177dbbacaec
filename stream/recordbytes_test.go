package stream

import (
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// TestBytesOf checks the estimate of the memory records hold that bounds
// the recomputation of recovered blocks.
func TestBytesOf(t *testing.T) {
	type record struct { // the shape of the Kinesis receiver's
		Data         []byte
		PartitionKey string
		Arrival      time.Time
		N            int64
	}
	type nested struct {
		R    record
		Keys [2]string
		Next *nested
		Any  any
		More []string
	}
	rec := record{Data: make([]byte, 100, 1000), PartitionKey: "key"}
	recSize := int64(unsafe.Sizeof(record{}))
	cases := []struct {
		name string
		got  int64
		want int64
	}{
		{"ints", bytesOf([]int{1, 2, 3}, sizerOf(reflect.TypeFor[int](), 0)), 24},
		{"strings", bytesOf([]string{"ab", "cde"}, sizerOf(reflect.TypeFor[string](), 0)), 2*16 + 5},
		{"byte slices: length, not capacity", bytesOf([]record{rec, {}}, sizerOf(reflect.TypeFor[record](), 0)), 2*recSize + 103},
		{"pointers, one level", bytesOf([]*record{&rec, nil}, sizerOf(reflect.TypeFor[*record](), 0)), 2*8 + recSize + 103},
		{"nested, arrays, a second pointer not followed", bytesOf([]nested{{R: rec, Keys: [2]string{"a", "bc"}, Next: &nested{R: rec}, More: []string{"xyz"}}},
			sizerOf(reflect.TypeFor[nested](), 0)), int64(unsafe.Sizeof(nested{})) + 103 + 3 + int64(unsafe.Sizeof(nested{})) + 103},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("bytesOf: %d, want %d", c.got, c.want)
			}
		})
	}
}
