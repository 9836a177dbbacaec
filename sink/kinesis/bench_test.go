package kinesis_test

import (
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
// of 500 records, failed ones retried, no order kept), and reports both
// rates and their ratio (sink/plain; the goal is >= 0.9). Alternating
// within one run, each first every other time, keeps the load of the
// machine the same for both. keys is
// the number of distinct partition keys: a call of the Sink holds at most
// one record per key, so with few keys it makes more calls than the loop.
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
			var plain, sink time.Duration
			bt := batch.Time(0)
			timed := func(f func() error) time.Duration {
				start := time.Now()
				if err := f(); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			putPlain := func() error { return localaws.PutRecordsOn(b.Context(), kc, name, data, key) }
			putSink := func() error { bt += 1000; return s.Write(b.Context(), batch.New(bt, nil, recs)) }
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 { // each goes first every other time
					plain += timed(putPlain)
					sink += timed(putSink)
				} else {
					sink += timed(putSink)
					plain += timed(putPlain)
				}
			}
			rate := func(d time.Duration) float64 { return float64(n*b.N) / d.Seconds() }
			b.ReportMetric(rate(plain), "plain-rec/s")
			b.ReportMetric(rate(sink), "sink-rec/s")
			b.ReportMetric(plain.Seconds()/sink.Seconds(), "ratio")
		})
	}
}
