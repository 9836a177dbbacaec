package origin

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

func TestTagRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		tag     Tag
		payload string
	}{
		{Tag{Writer: "app/out", Batch: 1700000000000, Index: 0}, "hello"},
		{Tag{Writer: "", Batch: 0, Index: 0}, ""},
		{Tag{Writer: string(bytes.Repeat([]byte("w"), MaxWriterLen)), Batch: math.MaxInt64, Index: math.MaxUint64}, "\xF6weir"},
		{Tag{Writer: "ü", Batch: -1, Index: 300}, "x"},
		{Tag{Stream: "in", Shard: "shardId-000000000001", Seq: "49590338271490256608559692538361571095921575989136588898", SubSeq: 3, Index: 2, RangeStart: "49590338271490256608559692538361571095921575989136588800"}, "v2"},
		{Tag{Stream: "", Shard: "s", Seq: "0", RangeStart: "0"}, ""},
		{Tag{Stream: "in", Shard: "shardId-999999999999", Seq: "123456", RangeStart: "99"}, "p"},
		{Tag{Stream: "in", Shard: "shardId-00000000000a", Seq: "10", RangeStart: "10"}, "p"},
		{Tag{Stream: "in", Shard: "shardId-0000000000001", Seq: "10", RangeStart: "9"}, "p"},
		{Tag{Stream: string(bytes.Repeat([]byte("s"), MaxNameLen)), Shard: "s", Seq: "12345", SubSeq: math.MaxUint64, Index: math.MaxUint64, RangeStart: "9"}, "\xF6weir"},
	} {
		data := Append([]byte("junk"), tc.tag, []byte(tc.payload))[len("junk"):]
		if got, want := len(data)-len(tc.payload), Overhead(tc.tag); got != want {
			t.Errorf("%+v: overhead %d, Overhead says %d", tc.tag, got, want)
		}
		tag, payload, ok, err := Decode(data)
		if err != nil || !ok {
			t.Fatalf("%+v: Decode: ok %v, %v", tc.tag, ok, err)
		}
		if diff := cmp.Diff(tc.tag, tag); diff != "" {
			t.Errorf("tag (-want +got):\n%s", diff)
		}
		if string(payload) != tc.payload {
			t.Errorf("payload %q, want %q", payload, tc.payload)
		}
	}
}

func TestDecodePlainAndMalformed(t *testing.T) {
	for _, plain := range []string{"", "hello", "\xF6wei", `{"a":1}`, "\xF3\x89\x9A\xC2"} {
		if _, _, ok, err := Decode([]byte(plain)); ok || err != nil {
			t.Errorf("Decode(%q) = ok %v, %v; want a plain record", plain, ok, err)
		}
	}
	good := Append(nil, Tag{Writer: "w", Batch: 5, Index: 7}, []byte("p"))
	v2 := Append(nil, Tag{Stream: "in", Shard: "s", Seq: "123", Index: 1, RangeStart: "12"}, nil)
	v2Tag := func(seq, start []byte) []byte {
		b := append([]byte(magic), 2, 2, 'i', 'n', 2, 's')
		b = append(b, seq...)
		b = append(b, 0, 0)
		return append(b, start...)
	}
	long := Append(nil, Tag{Writer: string(bytes.Repeat([]byte("w"), MaxWriterLen+1))}, nil)
	for name, data := range map[string][]byte{
		"no version":  []byte(magic),
		"version 3":   append([]byte(magic), 3, 0, 0, 0),
		"v2 cut":      v2[:len(v2)-1],
		"v2 no seq":   v2Tag([]byte{0}, []byte{0, 1, 0x10}),
		"v2 hex":      v2Tag([]byte{2, 0x1A}, []byte{0, 1, 0x10}),
		"v2 pad":      v2Tag([]byte{1, 0x11}, []byte{0, 1, 0x10}),
		"v2 zero":     v2Tag([]byte{2, 0x01}, []byte{0, 1, 0x00}),
		"v2 start":    v2Tag([]byte{1, 0x10}, []byte{0, 1, 0x20}),
		"v2 prefix":   v2Tag([]byte{1, 0x10}, []byte{2, 1, 0x10}),
		"v2 no start": v2Tag([]byte{1, 0x10}, []byte{0, 0}),
		"v2 shard":    append([]byte(magic), 2, 0, 0, 0x80, 0xA0, 0x94, 0xA5, 0x8D, 0x1D, 1, 0x10, 0, 0, 1, 0),
		"v2 long":     Append(nil, Tag{Stream: string(bytes.Repeat([]byte("s"), MaxNameLen+1)), Seq: "1", RangeStart: "1"}, nil),
		"writer cut":  good[:len(magic)+2],
		"no batch":    good[:len(magic)+3],
		"no index":    good[:len(magic)+4],
		"writer long": long,
	} {
		if _, _, ok, err := Decode(data); ok || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Decode = ok %v, %v; want ErrMalformed", name, ok, err)
		}
	}
}

// FuzzDecode checks that Decode never panics, that a tag it reads is
// re-encoded to the same bytes, and that data without the magic bytes is
// always a plain record.
func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, Tag{Writer: "w", Batch: 1700000000000, Index: 3}, []byte("payload")))
	f.Add([]byte(magic))
	f.Add(Append(nil, Tag{Stream: "in", Shard: "s", Seq: "123", SubSeq: 1, Index: 1, RangeStart: "12"}, []byte("payload")))
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range [][]byte{data, append([]byte(magic+"\x01"), data...), append([]byte(magic+"\x02"), data...)} {
			tag, payload, ok, err := Decode(d)
			switch {
			case !Tagged(d) && (ok || err != nil):
				t.Fatalf("untagged data: ok %v, err %v", ok, err)
			case ok && err != nil:
				t.Fatalf("ok with error %v", err)
			case ok:
				again := Append(nil, tag, payload)
				// Varints may be written longer than needed; the decoded
				// tag must survive a second round trip unchanged.
				tag2, payload2, ok2, err2 := Decode(again)
				if !ok2 || err2 != nil || tag2 != tag || !bytes.Equal(payload2, payload) {
					t.Fatalf("round trip of %+v %q: %+v %q ok %v %v", tag, payload, tag2, payload2, ok2, err2)
				}
				if len(again) != Overhead(tag)+len(payload) {
					t.Fatalf("Overhead(%+v) = %d, encoded %d", tag, Overhead(tag), len(again)-len(payload))
				}
			}
		}
	})
}

// TestMaxOverhead: no tag's overhead is more than MaxOverhead, and the
// longest version 2 tag's is MaxOverhead.
func TestMaxOverhead(t *testing.T) {
	name := string(bytes.Repeat([]byte("s"), MaxNameLen))
	nines := string(bytes.Repeat([]byte("9"), batch.MaxSeqDigits))
	longest := Tag{Stream: name, Shard: name, Seq: nines, SubSeq: math.MaxUint64, Index: math.MaxUint64,
		RangeStart: "1" + nines[1:]}
	if got := Overhead(longest); got != MaxOverhead {
		t.Errorf("Overhead of the longest version 2 tag = %d, MaxOverhead %d", got, MaxOverhead)
	}
	if got := len(Append(nil, longest, nil)); got != MaxOverhead {
		t.Errorf("Append of the longest version 2 tag adds %d bytes, MaxOverhead %d", got, MaxOverhead)
	}
	for _, tag := range []Tag{
		{Writer: string(bytes.Repeat([]byte("w"), MaxWriterLen)), Batch: math.MinInt64, Index: math.MaxUint64},
		{Stream: name, Shard: "shardId-999999999999", Seq: nines, SubSeq: math.MaxUint64, Index: math.MaxUint64, RangeStart: nines[:128]},
		{Stream: name, Shard: name, Seq: nines, SubSeq: math.MaxUint64, Index: math.MaxUint64, RangeStart: nines},
	} {
		if got := Overhead(tag); got > MaxOverhead {
			t.Errorf("Overhead(%.80v) = %d, more than MaxOverhead %d", tag, got, MaxOverhead)
		}
	}
}
