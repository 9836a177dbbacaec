package recovery

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzScanSegment feeds arbitrary bytes to the segment reader: it never
// panics, reports damage as a *CorruptError, and what it accepts as the
// valid prefix of a last segment reads back whole, with the same records.
func FuzzScanSegment(f *testing.F) {
	var seg []byte
	for _, rec := range []string{`{"v":1,"kind":"alloc","time":1}`, `{"v":1,"kind":"complete","time":1}`,
		`{"v":1,"kind":"shape","shape":{"sources":null,"outputs":[{"kind":"Print"}]}}`} {
		seg = appendFrame(seg, []byte(rec))
		f.Add(seg)
	}
	f.Add(seg[:len(seg)-3])
	f.Add(append(seg, 0, 0, 0))
	f.Add(appendFrame(nil, []byte("not json")))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, last := range []bool{false, true} {
			s, err := scanSegment("seg", data, last)
			if err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset >= int64(len(data)) {
					t.Fatalf("scanSegment(last=%v): %v, want a *CorruptError inside the data", last, err)
				}
				continue
			}
			if s.valid < 0 || s.valid > int64(len(data)) || (s.torn == nil) != (s.valid == int64(len(data))) {
				t.Fatalf("scanSegment(last=%v): valid %d of %d bytes, torn %v", last, s.valid, len(data), s.torn)
			}
			again, err := scanSegment("seg", data[:s.valid], false)
			if err != nil {
				t.Fatalf("rescan of the valid prefix: %v", err)
			}
			if diff := cmp.Diff(s.payloads, again.payloads); diff != "" {
				t.Fatalf("rescan mismatch (-want +got):\n%s", diff)
			}
		}
	})
}
