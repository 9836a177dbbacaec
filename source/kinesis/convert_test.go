package kinesis

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/kpl"
)

func krec(seq int, data string) types.Record {
	return types.Record{
		SequenceNumber: aws.String(strconv.Itoa(seq)), PartitionKey: aws.String("pk" + strconv.Itoa(seq)),
		Data: []byte(data), ApproximateArrivalTimestamp: aws.Time(time.Unix(int64(seq), 0)),
	}
}

func seqs(recs []types.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, aws.ToString(r.SequenceNumber))
	}
	return out
}

func TestTakeRange(t *testing.T) {
	page := []types.Record{krec(10, "a"), krec(20, "b"), krec(30, "c"), krec(100, "d")}
	tests := []struct {
		name     string
		first    string
		last     string
		lastRead string
		page     []types.Record
		want     []string
		done     bool
		wantErr  bool
	}{
		{name: "whole page, more to come", first: "10", last: "200", page: page, want: []string{"10", "20", "30", "100"}},
		{name: "ends inside", first: "10", last: "30", page: page, want: []string{"10", "20", "30"}, done: true},
		{name: "record past last ends the range", first: "10", last: "25", page: page, want: []string{"10", "20"}, done: true},
		{name: "numeric compare", first: "10", last: "99", page: page, want: []string{"10", "20", "30"}, done: true},
		{name: "trimmed start", first: "5", last: "30", page: page, wantErr: true},
		{name: "continuation page", first: "1", last: "100", lastRead: "9", page: page, want: []string{"10", "20", "30", "100"}, done: true},
		{name: "empty page", first: "1", last: "100", page: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, done, err := takeRange(rng("s0", tt.first, tt.last, 1), tt.page, tt.lastRead)
			if (err != nil) != tt.wantErr {
				t.Fatalf("takeRange error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, seqs(got)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if done != tt.done {
				t.Errorf("done = %v, want %v", done, tt.done)
			}
		})
	}
}

func TestConvertDeaggregates(t *testing.T) {
	agg := kpl.Aggregate([]kpl.UserRecord{
		{PartitionKey: "k1", Data: []byte("one")},
		{PartitionKey: "k2", ExplicitHashKey: "12345", Data: []byte("two")},
	})
	bad := append([]byte(nil), agg...)
	bad[len(bad)-1] ^= 0xff // break the digest
	in := []types.Record{krec(1, "plain"), krec(2, ""), krec(3, "")}
	in[1].Data, in[2].Data = agg, bad
	got, conv := convert("shard-1", in, fullHashRange)
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	want := []Record{
		{Data: []byte("plain"), PartitionKey: "pk1", SequenceNumber: "1", ApproximateArrivalTimestamp: at(1), ShardID: "shard-1"},
		{Data: []byte("one"), PartitionKey: "k1", SequenceNumber: "2", Aggregated: true, ApproximateArrivalTimestamp: at(2), ShardID: "shard-1"},
		{Data: []byte("two"), PartitionKey: "k2", ExplicitHashKey: "12345", SequenceNumber: "2", SubSequenceNumber: 1, Aggregated: true, ApproximateArrivalTimestamp: at(2), ShardID: "shard-1"},
		{Data: bad, PartitionKey: "pk3", SequenceNumber: "3", ApproximateArrivalTimestamp: at(3), ShardID: "shard-1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("convert (-want +got):\n%s", diff)
	}
	if conv.bad != 1 {
		t.Errorf("bad aggregates = %d, want 1", conv.bad)
	}
}

// urecs returns user records named by "seq/sub" ("5" is a plain record).
func urecs(names ...string) []Record {
	var out []Record
	for _, n := range names {
		seq, sub, agg := n, 0, false
		if i := len(n) - 2; i > 0 && n[i] == '/' {
			seq, sub, agg = n[:i], int(n[i+1]-'0'), true
		}
		out = append(out, Record{SequenceNumber: seq, SubSequenceNumber: int64(sub), Aggregated: agg})
	}
	return out
}

func names(recs []Record) []string {
	var out []string
	for _, r := range recs {
		n := r.SequenceNumber
		if r.Aggregated {
			n += "/" + strconv.FormatInt(r.SubSequenceNumber, 10)
		}
		out = append(out, n)
	}
	return out
}

func TestHeadTrim(t *testing.T) {
	read := urecs("10/0", "10/1", "10/2", "10/3", "11", "12/0")
	tests := []struct {
		name string
		pos  position
		in   []Record
		want []string
	}{
		{"inside the aggregate", position{At: "10", AtSubSequence: 1}, read, []string{"10/2", "10/3", "11", "12/0"}},
		{"its last user record", position{At: "10", AtSubSequence: 3}, read, []string{"11", "12/0"}},
		{"past its last user record", position{At: "10", AtSubSequence: 9}, read, []string{"11", "12/0"}},
		{"sub-sequence 0 leaves out nothing", position{At: "10"}, read, names(read)},
		{"KCL checkpoint at sub-sequence 0 of an aggregate", position{At: "10", AtCheckpoint: true}, read, []string{"10/1", "10/2", "10/3", "11", "12/0"}},
		{"KCL checkpoint on a plain record", position{At: "11", AtCheckpoint: true}, urecs("11", "12/0"), []string{"12/0"}},
		{"KCL checkpoint, record gone", position{At: "10", AtCheckpoint: true}, urecs("11", "12/0"), []string{"11", "12/0"}},
		{"after leaves out nothing", position{After: "9", At: "10", AtSubSequence: 1}, read, names(read)},
		{"a plain record at At", position{At: "11", AtSubSequence: 2}, urecs("11", "12/0"), []string{"12/0"}},
		{"trimmed: another record first", position{At: "10", AtSubSequence: 2}, urecs("11", "12/0"), []string{"11", "12/0"}},
		{"only the head", position{At: "10", AtSubSequence: 9}, urecs("10/0", "10/1"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, names(headTrimAt(tt.pos).apply(tt.in))); diff != "" {
				t.Errorf("apply (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFitCount(t *testing.T) {
	read := urecs("10/0", "10/1", "10/2", "11")
	tests := []struct {
		name    string
		first   string
		count   int
		want    []string
		wantErr bool
	}{
		{"exact", "10", 4, names(read), false},
		{"head of the first aggregate left out", "10", 2, []string{"10/2", "11"}, false},
		{"all of it left out", "10", 1, []string{"11"}, false},
		{"more than the aggregate", "10", 0, nil, true},
		{"fewer than the range holds", "10", 5, nil, true},
		{"extra records of another record", "11", 2, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fitCount(rng("s0", tt.first, "11", tt.count), read)
			if (err != nil) != tt.wantErr {
				t.Fatalf("fitCount error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, names(got)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
	// A plain record at a KCL checkpoint is left out of its block, so it
	// is left out again.
	t.Run("plain record at First", func(t *testing.T) {
		got, err := fitCount(rng("s0", "9", "11", 2), urecs("9", "10/0", "11"))
		if err != nil || !cmp.Equal([]string{"10/0", "11"}, names(got)) {
			t.Errorf("fitCount = %v, %v; want [10/0 11]", names(got), err)
		}
	})
}

// BenchmarkConvert converts one full GetRecords result (10000 records of
// 100 B), plain or KPL aggregates of 10 user records, read from a shard
// holding every hash key or from one child of a split (whose filter hashes
// every user record's partition key).
func BenchmarkConvert(b *testing.B) {
	for _, bc := range []struct {
		name string
		agg  bool
		keys hashRange
	}{
		{"plain", false, fullHashRange},
		{"aggregates", true, fullHashRange},
		{"aggregates in a child", true, lowerHalf},
	} {
		b.Run(bc.name, func(b *testing.B) {
			recs := make([]types.Record, 10000)
			for i := range recs {
				recs[i] = krec(i+1, string(make([]byte, 100)))
				if bc.agg {
					users := make([]kpl.UserRecord, 10)
					for u := range users {
						users[u] = kpl.UserRecord{PartitionKey: "key-" + strconv.Itoa(i*10+u), Data: make([]byte, 100)}
					}
					recs[i].Data = kpl.Aggregate(users)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if out, conv := convert("shard-1", recs, bc.keys); len(out) == 0 || conv.bad != 0 {
					b.Fatal("nothing converted")
				}
			}
		})
	}
}
