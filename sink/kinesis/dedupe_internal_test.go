package kinesis

import (
	"testing"

	"github.com/weirstream/weir/internal/origin"
)

// TestFilterCodecRoundTrip checks that Deduplicate's state codec gives back
// filters that decide as the encoded ones would, nil filters as nil, and
// refuses cut or padded encodings.
func TestFilterCodecRoundTrip(t *testing.T) {
	f := origin.NewFilter(0)
	tag := func(i uint64) origin.Tag { return origin.Tag{Writer: "w", Batch: 1000, Index: i} }
	for i := range uint64(100) {
		f.Keep(tag(i))
	}
	data, err := filterCodec{}.Encode([]*origin.Filter{nil, f})
	if err != nil {
		t.Fatal(err)
	}
	back, err := filterCodec{}.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0] != nil || back[1] == nil {
		t.Fatalf("decoded %v, want [nil, a filter]", back)
	}
	if back[1].Keep(tag(50)) || !back[1].Keep(tag(100)) {
		t.Error("the decoded filter does not remember what the encoded one saw")
	}
	for _, bad := range [][]byte{data[:len(data)-1], append(data[:len(data):len(data)], 0), {5}} {
		if _, err := (filterCodec{}).Decode(bad); err == nil {
			t.Errorf("Decode(% x) succeeded", bad)
		}
	}
}

// BenchmarkFilter is the work Deduplicate adds per record to taking the tag
// off (origin.Decode alone), without the engine: one writer, a record in
// ten a copy.
func BenchmarkFilter(b *testing.B) {
	data := make([][]byte, 10_000)
	for i := range data {
		data[i] = origin.Append(nil, origin.Tag{Writer: "bench/out", Batch: 1000, Index: uint64(i - i/10)}, make([]byte, 100))
	}
	b.Run("Decode", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, _, _, err := origin.Decode(data[i%len(data)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("filter", func(b *testing.B) {
		f := origin.NewFilter(0)
		for i := 0; b.Loop(); i++ {
			if i%len(data) == 0 {
				f = origin.NewFilter(0)
			}
			if _, _, err := filter(f, data[i%len(data)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
