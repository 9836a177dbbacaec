package kinesis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/sink/kinesis"
)

// BenchmarkWriteVsPlain writes batches of 5000 records of 100 bytes to a
// stream of 4 shards on kinesalite, alternately with the Sink and with a
// plain PutRecords loop with the same batching (localaws.PutRecordsOn: calls
// of 500 records, failed ones retried, no order kept), each first every
// other time so that both see the same load, and reports the median rate
// of each and the median of the pairs' ratios (sink rate / plain rate; the
// goal is >= 0.9). keys is the number of distinct partition keys: a call of
// the Sink holds at most one record per key, so with 100 keys it makes 50
// calls where the loop makes 10, or 1 with aggregation (the records the
// loop puts are not aggregated: the ratio then compares the two ways).
func BenchmarkWriteVsPlain(b *testing.B) {
	env := servers.Env(b)
	const n, size = 5000, 100
	for _, tc := range []struct {
		name      string
		keys      int
		origin    string
		aggregate bool
	}{
		{"keys=5000", n, "", false},
		{"keys=5000/origin", n, "bench/out", false},
		{"keys=100", 100, "", false},
		{"keys=100/aggregate", 100, "", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			name := newStream(b, env, 4)
			kc := env.Kinesis()
			data := make([][]byte, n)
			recs := make([]int, n)
			for i := range data {
				data[i] = make([]byte, size)
				recs[i] = i
			}
			key := func(i int) string { return strconv.Itoa(i % tc.keys) }
			s, err := kinesis.New(kinesis.Config[int]{Client: kc, Stream: name, Origin: tc.origin, Aggregate: tc.aggregate,
				Record: func(i int) (string, []byte) { return key(i), data[i] }})
			if err != nil {
				b.Fatal(err)
			}
			var plain, sink, ratios []float64 // seconds per batch, and plain/sink of each pair
			bt := batch.Time(0)
			timed := func(f func() error) float64 {
				start := time.Now()
				if err := f(); err != nil {
					b.Fatal(err)
				}
				return time.Since(start).Seconds()
			}
			putPlain := func() error { return localaws.PutRecordsOn(b.Context(), kc, name, data, key) }
			putSink := func() error { bt += 1000; return s.Write(b.Context(), batch.New(bt, nil, recs)) }
			for i := 0; b.Loop(); i++ {
				var p, k float64
				if i%2 == 0 { // each goes first every other time
					p, k = timed(putPlain), timed(putSink)
				} else {
					k, p = timed(putSink), timed(putPlain)
				}
				plain, sink, ratios = append(plain, p), append(sink, k), append(ratios, p/k)
			}
			b.ReportMetric(n/median(plain), "plain-rec/s")
			b.ReportMetric(n/median(sink), "sink-rec/s")
			b.ReportMetric(median(ratios), "ratio")
		})
	}
}

// median returns the median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// nopKinesis answers every PutRecords call with success at once.
type nopKinesis struct{ out awskinesis.PutRecordsOutput }

func (k *nopKinesis) PutRecords(_ context.Context, in *awskinesis.PutRecordsInput, _ ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	k.out.Records = slices.Grow(k.out.Records[:0], len(in.Records))[:len(in.Records)]
	return &k.out, nil
}

// BenchmarkWriteCPU measures the CPU the Sink spends per record, without a
// server: 5000 records of 100 bytes with distinct keys, put through a
// client that answers at once, by the Sink (with and without origin tags)
// and by a plain loop that builds the calls of 500 records itself.
func BenchmarkWriteCPU(b *testing.B) {
	const n, size = 5000, 100
	data := make([][]byte, n)
	recs := make([]int, n)
	keys := make([]string, n)
	for i := range data {
		data[i], recs[i], keys[i] = make([]byte, size), i, strconv.Itoa(i)
	}
	b.Run("plain", func(b *testing.B) {
		kc := &nopKinesis{}
		for b.Loop() {
			for start := 0; start < n; start += 500 {
				entries := make([]types.PutRecordsRequestEntry, 0, 500)
				for i := start; i < min(n, start+500); i++ {
					entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(keys[i]), Data: data[i]})
				}
				if _, err := kc.PutRecords(b.Context(), &awskinesis.PutRecordsInput{StreamName: aws.String("out"), Records: entries}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/record")
	})
	for _, origin := range []string{"", "bench/out"} {
		b.Run("sink/origin="+origin, func(b *testing.B) {
			s, err := kinesis.New(kinesis.Config[int]{Client: &nopKinesis{}, Stream: "out", Origin: origin,
				Record: func(i int) (string, []byte) { return keys[i], data[i] }})
			if err != nil {
				b.Fatal(err)
			}
			bt := batch.Time(0)
			for b.Loop() {
				bt += 1000
				if err := s.Write(b.Context(), batch.New(bt, nil, recs)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/record")
		})
	}
	b.Run("sink/origins", func(b *testing.B) {
		s, err := kinesis.New(kinesis.Config[int]{Client: &nopKinesis{}, Stream: "out", Origin: "bench/out",
			Record: func(i int) (string, []byte) { return keys[i], data[i] }})
		if err != nil {
			b.Fatal(err)
		}
		seq := func(i int) string { return fmt.Sprintf("49590338271490256608559692538361%024d", i) }
		origins := make([]batch.Origin, n)
		for i := range origins {
			origins[i] = batch.Origin{Stream: "in", Shard: "shardId-000000000001", Seq: seq(i)}
		}
		blocks := []batch.BlockInfo{{Ranges: []batch.SeqRange{{Stream: "in", Shard: "shardId-000000000001", First: seq(0), Last: seq(n - 1), Count: n}}, Count: n}}
		bt := batch.Time(0)
		for b.Loop() {
			bt += 1000
			if err := s.Write(b.Context(), batch.New(bt, blocks, recs).WithOrigins(origins)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*b.N), "ns/record")
	})
}
