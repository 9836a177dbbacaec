package kinesis

import (
	"github.com/weirstream/weir/internal/hashkey"
	"log/slog"
	"math/big"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/kpl"
)

// Hash keys of the split of a shard holding every key into two halves.
const (
	maxKey      = "340282366920938463463374607431768211455" // 2^128-1
	lowerEnd    = "170141183460469231731687303715884105727" // 2^127-1
	upperStart  = "170141183460469231731687303715884105728" // 2^127
	keyInLower  = "a"                                       // MD5 0cc175b9...: below 2^127
	keyInUpper  = "b"                                       // MD5 92eb5ffe...: 2^127 or more
	notAHashKey = "12x"
)

func TestParseHashKey(t *testing.T) {
	tests := []struct {
		in   string
		want string // decimal; "" for not a hash key
	}{
		{"0", "0"},
		{"00042", "42"},
		{lowerEnd, lowerEnd},
		{upperStart, upperStart},
		{"18446744073709551616", "18446744073709551616"}, // 2^64
		{maxKey, maxKey},
		{"340282366920938463463374607431768211456", ""}, // 2^128
		{"3402823669209384634633746074317682114550", ""},
		{"", ""},
		{"-1", ""},
		{"+1", ""},
		{notAHashKey, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			k, ok := hashkey.Parse(tt.in)
			got := ""
			if ok {
				got = keyString(k)
			}
			if got != tt.want {
				t.Errorf("hashkey.Parse(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
			}
		})
	}
}

// keyString formats k in decimal.
func keyString(k hashKey) string {
	v := new(big.Int).Lsh(new(big.Int).SetUint64(k.Hi), 64)
	return v.Or(v, new(big.Int).SetUint64(k.Lo)).String()
}

func TestPartitionHashKey(t *testing.T) {
	for key, want := range map[string]string{
		keyInLower: "16955237001963240173058271559858726497",  // 0x0cc175b9c0f1b6a831c399e269772661
		keyInUpper: "195289424170611159128911017612795795343", // 0x92eb5ffee6ae2fec3ad71c777531578f
	} {
		if got := keyString(hashkey.Of(key)); got != want {
			t.Errorf("hashkey.Of(%q) = %s, want %s", key, got, want)
		}
	}
}

func TestParseHashRange(t *testing.T) {
	if r, ok := hashkey.ParseRange("0", maxKey); !ok || r != fullHashRange {
		t.Errorf("hashkey.ParseRange(0, 2^128-1) = %+v, %v; want the full range", r, ok)
	}
	if r, ok := hashkey.ParseRange("0", lowerEnd); !ok || r != lowerHalf {
		t.Errorf("hashkey.ParseRange(0, 2^127-1) = %+v, %v; want the lower half", r, ok)
	}
	for _, bad := range [][2]string{{"", maxKey}, {"0", ""}, {upperStart, lowerEnd}, {"0", notAHashKey}} {
		if r, ok := hashkey.ParseRange(bad[0], bad[1]); ok {
			t.Errorf("hashkey.ParseRange(%q, %q) = %+v, want not ok", bad[0], bad[1], r)
		}
	}
}

// TestHashRangeKeep checks which user records of one aggregate a shard
// keeps: those whose hash key (explicit, else the MD5 of the partition
// key) is in its range, ends included.
func TestHashRangeKeep(t *testing.T) {
	upper, _ := hashkey.ParseRange(upperStart, maxKey)
	ur := func(pk, ehk string) kpl.UserRecord {
		return kpl.UserRecord{PartitionKey: pk, ExplicitHashKey: ehk, Data: []byte(pk + "/" + ehk)}
	}
	tests := []struct {
		name string
		keys hashRange
		recs []kpl.UserRecord
		want []string // the Data of the records kept
		nOut int
	}{
		{"all in, explicit", lowerHalf, []kpl.UserRecord{ur("x", "0"), ur("x", "5"), ur("x", lowerEnd)}, []string{"x/0", "x/5", "x/" + lowerEnd}, 0},
		{"all in, partition keys", lowerHalf, []kpl.UserRecord{ur(keyInLower, ""), ur(keyInLower, "")}, []string{"a/", "a/"}, 0},
		{"part out, explicit", lowerHalf, []kpl.UserRecord{ur("x", "1"), ur("x", upperStart), ur("x", "2")}, []string{"x/1", "x/2"}, 1},
		{"part out, partition keys", lowerHalf, []kpl.UserRecord{ur(keyInUpper, ""), ur(keyInLower, ""), ur(keyInUpper, "")}, []string{"a/"}, 2},
		{"explicit key wins over the partition key", upper, []kpl.UserRecord{ur(keyInLower, maxKey), ur(keyInUpper, "0")}, []string{"a/" + maxKey}, 1},
		{"all out", upper, []kpl.UserRecord{ur(keyInLower, ""), ur("x", lowerEnd)}, nil, 2},
		{"not a hash key: kept", lowerHalf, []kpl.UserRecord{ur("x", notAHashKey), ur("x", "-1"), ur("x", "340282366920938463463374607431768211456")}, []string{"x/" + notAHashKey, "x/-1", "x/340282366920938463463374607431768211456"}, 0},
		{"full range keeps all", fullHashRange, []kpl.UserRecord{ur(keyInLower, ""), ur(keyInUpper, ""), ur("x", maxKey)}, []string{"a/", "b/", "x/" + maxKey}, 0},
		{"empty", lowerHalf, nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, out := keepInRange(tt.keys, tt.recs)
			var got []string
			for _, r := range kept {
				got = append(got, string(r.Data))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || out != tt.nOut {
				t.Errorf("kept (-want +got):\n%s\nleft out %d, want %d", diff, out, tt.nOut)
			}
		})
	}
}

// TestConvertFiltersByHashRange converts a page read from the lower child
// of a split: aggregates are kept, cut or dropped by the child's range,
// with their sub-sequence numbers unchanged; plain records and malformed
// aggregates pass whole.
func TestConvertFiltersByHashRange(t *testing.T) {
	agg := func(keys ...string) []byte {
		var urs []kpl.UserRecord
		for _, k := range keys {
			urs = append(urs, kpl.UserRecord{PartitionKey: k, Data: []byte(k)})
		}
		return kpl.Aggregate(urs)
	}
	malformed := agg(keyInUpper)
	malformed[len(malformed)-1] ^= 0xff // break the digest
	data := [][]byte{
		[]byte("plain"),                         // 1: never filtered, whatever its key
		agg(keyInLower, keyInLower),             // 2: all in
		agg(keyInLower, keyInUpper, keyInLower), // 3: partly out
		agg(keyInUpper, keyInUpper),             // 4: all out
		malformed,                               // 5: passes whole
	}
	page := hostilePage(data...)
	page[0].PartitionKey = aws.String(keyInUpper)
	out, conv := convert("shard-1", page, lowerHalf)
	var got []string
	for _, r := range out {
		got = append(got, r.SequenceNumber+"/"+strconv.FormatInt(r.SubSequenceNumber, 10)+"="+string(r.Data[:min(len(r.Data), 5)]))
	}
	want := []string{"1/0=plain", "2/0=a", "2/1=a", "3/0=a", "3/2=a", "5/0=" + string(malformed[:5])}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("user records (-want +got):\n%s", diff)
	}
	if conv.bad != 1 || conv.outside != 3 || conv.badSeq != "5" || conv.badErr == nil {
		t.Errorf("convert counted %+v, want 1 bad (at 5, with its error) and 3 outside", conv)
	}
}

// TestKeepOutOfRangeRecords checks that Config.KeepOutOfRangeRecords turns
// the hash key filter off for every reader and Recompute alike, without a
// shard listing: the client, nil here, is never called.
func TestKeepOutOfRangeRecords(t *testing.T) {
	lower, ok := hashkey.ParseRange("0", lowerEnd)
	if !ok {
		t.Fatal("the lower half does not parse")
	}
	for _, keep := range []bool{false, true} {
		r, err := New(Config{Stream: "s", App: "app", KeepOutOfRangeRecords: keep})
		if err != nil {
			t.Fatal(err)
		}
		r.ranges.note("s", []shardInfo{{ID: "shard-0", StartingHashKey: "0", EndingHashKey: lowerEnd}})
		got, err := r.hashRangeOf(t.Context(), nil, nil, "s", "shard-0", 1, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		want := lower
		if keep {
			want = fullHashRange
		}
		if got != want {
			t.Errorf("KeepOutOfRangeRecords %v: range %v, want %v", keep, got, want)
		}
	}
}
