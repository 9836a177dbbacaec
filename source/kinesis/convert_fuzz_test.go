package kinesis

import (
	"crypto/md5"
	"encoding/binary"
	"github.com/weirstream/weir/internal/hashkey"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/allocs"
	"github.com/weirstream/weir/internal/kpl"
)

// The kinds of record of a fuzz input (see pageOf).
const (
	kindPlain     = iota // the bytes, as they are
	kindAggregate        // the bytes framed as a KPL aggregate, with a right digest
	kindMagic            // the KPL magic number, then the bytes
	kinds
)

// kplMagic is the four bytes that start a KPL aggregate.
const kplMagic = "\xF3\x89\x9A\xC2"

// pageOf decodes a fuzz input into a GetRecords page. The input is a
// sequence of records, each a kind byte, a uvarint length and that many
// bytes (what is left, at the end). Random bytes almost never end with the
// right MD5, so kindAggregate frames them as an aggregate's protobuf body:
// that is what lets the fuzzer reach the decoder. Sequence numbers count
// from 1.
func pageOf(in []byte) []types.Record {
	var page []types.Record
	for len(in) > 0 {
		kind := in[0] % kinds
		n, w := binary.Uvarint(in[1:])
		if w <= 0 || n > uint64(len(in)-1-w) {
			n, w = uint64(len(in)-1-max(w, 0)), max(w, 0)
		}
		b := in[1+w : 1+w+int(n)]
		in = in[1+w+int(n):]
		switch kind {
		case kindAggregate:
			sum := md5.Sum(b)
			b = append(append([]byte(kplMagic), b...), sum[:]...)
		case kindMagic:
			b = append([]byte(kplMagic), b...)
		}
		r := krec(len(page)+1, "")
		r.Data = b
		page = append(page, r)
	}
	return page
}

// pageRecord is one record of a fuzz input, for the seeds.
type pageRecord struct {
	kind byte
	data []byte
}

// fuzzInput encodes records as pageOf decodes them.
func fuzzInput(recs ...pageRecord) []byte {
	var in []byte
	for _, r := range recs {
		in = append(in, r.kind)
		in = binary.AppendUvarint(in, uint64(len(r.data)))
		in = append(in, r.data...)
	}
	return in
}

// body returns the protobuf body of a KPL aggregate.
func body(aggregate []byte) []byte { return aggregate[len(kplMagic) : len(aggregate)-md5.Size] }

// kplSeeds returns the inputs of the KPL decoder's fuzz corpus, which hold
// its golden aggregate's bytes and the crashers it found.
func kplSeeds(f *testing.F) [][]byte {
	files, err := filepath.Glob(filepath.Join("..", "..", "internal", "kpl", "testdata", "fuzz", "FuzzDeaggregate", "*"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no KPL fuzz corpus: %v", err)
	}
	var seeds [][]byte
	for _, name := range files {
		text, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(text)), "\n")
		quoted, ok := strings.CutPrefix(lines[len(lines)-1], "[]byte(")
		s, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
		if !ok || err != nil {
			f.Fatalf("%s: not a []byte corpus entry: %v", name, err)
		}
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// FuzzConvert converts whole pages, of plain records, KPL aggregates and
// records that only look like aggregates, as polling, fan-out and
// Recompute do. It checks that convert never panics, allocates within a
// small multiple of the page's bytes (issue 17, item 1), and returns every
// record in order: a plain record whole, an aggregate as user records whose
// data lies within its own; and that Recompute gives back what a reader
// started at a KCL checkpoint inside the page's first record delivered.
func FuzzConvert(f *testing.F) {
	golden := kpl.Aggregate([]kpl.UserRecord{
		{PartitionKey: "a", Data: []byte("hi")},
		{PartitionKey: "b", ExplicitHashKey: "42", Data: []byte{}},
		{PartitionKey: "a", Data: []byte("x")},
	})
	for _, s := range append(kplSeeds(f), golden, body(golden)) {
		f.Add(fuzzInput(pageRecord{kindPlain, s}, pageRecord{kindAggregate, s}, pageRecord{kindMagic, s}))
	}
	f.Add(fuzzInput(pageRecord{kindAggregate, body(golden)}, pageRecord{kindPlain, []byte("plain")}, pageRecord{kindAggregate, body(denseAggregate(0))}))
	dense := []pageRecord{{kindAggregate, body(denseAggregate(200))}}
	for range 50 {
		dense = append(dense, pageRecord{kindPlain, []byte("x")})
	}
	f.Add(fuzzInput(dense...))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, in []byte) {
		page := pageOf(in)
		keys := fullHashRange // a shard that was never split, or one half of a split
		if len(in)%2 == 1 {
			keys = lowerHalf
		}
		var (
			out  []Record
			conv conversion
		)
		got := allocs.Bytes(func() { out, conv = convert("shard-1", page, keys) })
		if limit := maxConvertAlloc(page); got > limit {
			t.Fatalf("convert of a %d-byte page of %d records allocated %d bytes, want at most %d",
				pageBytes(page), len(page), got, limit)
		}
		checkConverted(t, page, keys, out, conv)
		checkRecomputed(t, page, keys, out, in)
	})
}

// checkRecomputed checks that Recompute gives back exactly what a reader
// delivered of page: a reader started at a KCL checkpoint inside the
// page's first record (its first user records left out, up to a
// sub-sequence number the input picks) delivers the rest as a range whose
// Count is theirs; Recompute converts the page again and fits the count.
func checkRecomputed(t *testing.T, page []types.Record, keys hashRange, out []Record, in []byte) {
	t.Helper()
	if len(page) == 0 || len(in) == 0 {
		return
	}
	first := aws.ToString(page[0].SequenceNumber)
	trim := headTrimAt(position{At: first, AtSubSequence: int64(in[0]%8) - 1, AtCheckpoint: true})
	delivered := trim.apply(slices.Clone(out))
	if len(delivered) == 0 {
		return // nothing delivered: no range to recompute
	}
	rng := batch.SeqRange{Shard: "shard-1", First: first, Last: aws.ToString(page[len(page)-1].SequenceNumber), Count: len(delivered)}
	again, _ := convert("shard-1", page, keys)
	got, err := fitCount(rng, again)
	if err != nil {
		t.Fatalf("recompute of a range of %d delivered records (trim %+v): %v", len(delivered), trim, err)
	}
	if diff := cmp.Diff(delivered, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("recompute (trim %+v) differs from what was delivered (-delivered +recomputed):\n%s", trim, diff)
	}
}

// lowerHalf is the hash key range of the first child of a shard holding
// every key split in two.
var lowerHalf = hashRange{End: hashKey{Hi: 1<<63 - 1, Lo: 1<<64 - 1}}

// checkConverted checks what convert made of page, read from a shard whose
// hash key range is keys: for each record in order, either the record
// whole or the user records of an aggregate that keys holds, no more than
// its bytes can hold, each with its data within the record's.
func checkConverted(t *testing.T, page []types.Record, keys hashRange, out []Record, conv conversion) {
	t.Helper()
	if cap(out) != len(out) {
		t.Fatalf("%d records with room for %d", len(out), cap(out))
	}
	next, looked, outside := 0, 0, 0
	for _, kr := range page {
		seq := aws.ToString(kr.SequenceNumber)
		end := next
		for end < len(out) && out[end].SequenceNumber == seq {
			end++
		}
		recs := out[next:end]
		next = end
		if kpl.MaybeAggregate(kr.Data) {
			looked++
		}
		for _, r := range recs {
			if r.ShardID != "shard-1" || !r.ApproximateArrivalTimestamp.Equal(aws.ToTime(kr.ApproximateArrivalTimestamp)) {
				t.Fatalf("record %s: shard %q, arrival %v; want the page record's", seq, r.ShardID, r.ApproximateArrivalTimestamp)
			}
		}
		if len(recs) == 1 && !recs[0].Aggregated {
			r := recs[0]
			if unsafe.SliceData(r.Data) != unsafe.SliceData(kr.Data) || len(r.Data) != len(kr.Data) ||
				r.PartitionKey != aws.ToString(kr.PartitionKey) || r.SubSequenceNumber != 0 {
				t.Fatalf("record %s is not passed through whole: %+v", seq, r)
			}
			continue
		}
		if !kpl.MaybeAggregate(kr.Data) {
			t.Fatalf("record %s does not look like an aggregate, but gave %d user records", seq, len(recs))
		}
		if most := (len(kr.Data) - len(kplMagic) - md5.Size) / minUserRecordBytes; len(recs) > most {
			t.Fatalf("record %s of %d bytes gave %d user records, more than the %d it can hold", seq, len(kr.Data), len(recs), most)
		}
		all, _, _ := kpl.Deaggregate(kr.Data, aws.ToString(kr.PartitionKey))
		outside += len(all) - len(recs)
		u := 0 // the next user record of all that recs may hold
		for _, r := range recs {
			for u < len(all) && !inRange(keys, all[u]) {
				u++
			}
			if u == len(all) || !r.Aggregated || r.SubSequenceNumber != int64(u) || !within(r.Data, kr.Data) || cap(r.Data) != len(r.Data) {
				t.Fatalf("user record %d of record %s: aggregated %v, sub-sequence %d, data %d bytes (room %d) within the record %v; want the next one in range of %d",
					u, seq, r.Aggregated, r.SubSequenceNumber, len(r.Data), cap(r.Data), within(r.Data, kr.Data), len(all))
			}
			u++
		}
		for ; u < len(all); u++ {
			if inRange(keys, all[u]) {
				t.Fatalf("user record %d of record %s is in the shard's range but was left out", u, seq)
			}
		}
	}
	if outside != conv.outside {
		t.Fatalf("%d user records left out, convert counted %d", outside, conv.outside)
	}
	bad := conv.bad
	if next != len(out) {
		t.Fatalf("record %d of %d (%s) is not in the page's order", next, len(out), out[next].SequenceNumber)
	}
	if bad > looked {
		t.Fatalf("%d bad aggregates among %d records that look like one", bad, looked)
	}
}

// inRange reports whether a shard whose range is keys keeps ur: its hash
// key is in keys, or it has an explicit hash key that is not one.
func inRange(keys hashRange, ur kpl.UserRecord) bool {
	k := hashkey.Of(ur.PartitionKey)
	if ur.ExplicitHashKey != "" {
		ehk, ok := new(big.Int).SetString(ur.ExplicitHashKey, 10)
		if !ok || ehk.Sign() < 0 || ehk.BitLen() > 128 || strings.ContainsAny(ur.ExplicitHashKey, "+-_") {
			return true
		}
		var b [16]byte
		ehk.FillBytes(b[:])
		k = hashKey{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}
	}
	return keys.Contains(k)
}

// within reports whether sub lies in the memory of whole.
func within(sub, whole []byte) bool {
	if len(sub) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(whole)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return p >= lo && p+uintptr(len(sub)) <= lo+uintptr(len(whole))
}
