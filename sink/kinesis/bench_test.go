package kinesis_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

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
// calls where the loop makes 10.
func BenchmarkWriteVsPlain(b *testing.B) {
	env := servers.Env(b)
	const n, size = 5000, 100
	for _, tc := range []struct {
		name   string
		keys   int
		origin string
	}{
		{"keys=5000", n, ""},
		{"keys=5000/origin", n, "bench/out"},
		{"keys=100", 100, ""},
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
			s, err := kinesis.New(kinesis.Config[int]{Client: kc, Stream: name, Origin: tc.origin,
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
