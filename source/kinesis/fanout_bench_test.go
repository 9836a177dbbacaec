package kinesis

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source"
)

// Settings of BenchmarkFanOutLatency: a low steady rate, kept small for
// kinesis-mock.
const (
	latencyRate  = 50                    // records put per second
	latencyBlock = 50 * time.Millisecond // both receivers' block interval
)

// latencyRecords returns the records BenchmarkFanOutLatency puts: 500 (10
// s at latencyRate), or 50 under -short (scripts/test's smoke run, which
// measures nothing).
func latencyRecords() int {
	if testing.Short() {
		return 50
	}
	return 500
}

// BenchmarkFanOutLatency measures put-to-push latency (PutRecords called to
// the block holding the record stored) of a polling receiver and a
// fan-out receiver with default settings, reading the same kinesis-mock
// stream at the same time while records are put at a steady low rate. It
// reports the p50 and p99 of each and their ratios (fan-out / polling).
// Run with -benchtime=1x; each iteration is one stream of latencyRecords().
//
//	go test ./source/kinesis -run '^$' -bench FanOutLatency -benchtime=1x -count=3
//
// kinesis-mock pushes a subscription's records once a second, where Kinesis
// pushes them as they arrive: its fan-out numbers are the emulator's, not
// the service's. Polling is not throttled by it either.
func BenchmarkFanOutLatency(b *testing.B) {
	env := mockServers.Env(b)
	var polling, fanout []time.Duration
	for range b.N {
		p, f := measureLatency(b, env)
		polling, fanout = append(polling, p...), append(fanout, f...)
	}
	pp50, pp99 := percentile(polling, 50), percentile(polling, 99)
	fp50, fp99 := percentile(fanout, 50), percentile(fanout, 99)
	b.ReportMetric(ms(pp50), "poll-p50-ms")
	b.ReportMetric(ms(pp99), "poll-p99-ms")
	b.ReportMetric(ms(fp50), "fanout-p50-ms")
	b.ReportMetric(ms(fp99), "fanout-p99-ms")
	b.ReportMetric(ms(fp50)/ms(pp50), "p50-fanout/poll")
	b.ReportMetric(ms(fp99)/ms(pp99), "p99-fanout/poll")
	b.ReportMetric(0, "ns/op") // an iteration's time says nothing here
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

// latencies records, per receiver, the latency of each record it pushed.
type latencies struct {
	mu      sync.Mutex
	put     map[string]time.Time
	got     map[string][]time.Duration
	arrived chan struct{} // 1 slot: a push happened
}

func (l *latencies) push(name string) func(context.Context, source.Block[Record]) (batch.BlockInfo, error) {
	return func(_ context.Context, b source.Block[Record]) (batch.BlockInfo, error) {
		now := time.Now()
		l.mu.Lock()
		for _, r := range b.Records {
			if at, ok := l.put[string(r.Data)]; ok {
				l.got[name] = append(l.got[name], now.Sub(at))
			}
		}
		l.mu.Unlock()
		select {
		case l.arrived <- struct{}{}:
		default:
		}
		return batch.BlockInfo{Ranges: b.Ranges, Count: len(b.Records)}, nil
	}
}

// waitAll waits until every receiver pushed n timed records.
func (l *latencies) waitAll(b *testing.B, n int, names ...string) {
	b.Helper()
	guard := time.NewTimer(waitLimit)
	defer guard.Stop()
	for {
		l.mu.Lock()
		done := true
		for _, name := range names {
			done = done && len(l.got[name]) >= n
		}
		l.mu.Unlock()
		if done {
			return
		}
		select {
		case <-l.arrived:
		case <-guard.C:
			l.mu.Lock()
			counts := make(map[string]int)
			for _, name := range names {
				counts[name] = len(l.got[name])
			}
			l.mu.Unlock()
			b.Fatalf("not every receiver pushed %d records within %v: %v", n, waitLimit, counts)
		}
	}
}

// measureLatency runs a polling and a fan-out receiver on a new stream
// while putting latencyRecords() at latencyRate, and returns their
// latencies.
func measureLatency(b *testing.B, env *localaws.Env) (polling, fanout []time.Duration) {
	ctx := b.Context()
	client := env.KinesisMock()
	stream := localaws.UniqueName(b)
	if err := localaws.CreateStreamOn(ctx, client, stream, 2); err != nil {
		b.Fatal(err)
	}
	l := &latencies{put: make(map[string]time.Time), got: make(map[string][]time.Duration), arrived: make(chan struct{}, 1)}
	start := func(name string, fo *FanOutConfig) {
		r, err := New(Config{
			Stream: stream, App: "bench-" + name, InitialPosition: TrimHorizon, FanOut: fo,
			Client: env.KinesisMock(func(o *awskinesis.Options) { o.Retryer = aws.NopRetryer{} }),
		})
		if err != nil {
			b.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(context.Background(), source.Runtime[Record]{Push: l.push(name), BlockInterval: latencyBlock})
		}()
		b.Cleanup(func() {
			if err := r.Stop(context.Background()); err != nil {
				b.Error(err)
			}
			if err := <-errc; err != nil {
				b.Errorf("%s receiver: %v", name, err)
			}
		})
	}
	start("polling", nil)
	start("fanout", &FanOutConfig{ConsumerName: "bench"})

	// Warm up: both read a first record before timing starts.
	put := func(data string) {
		// The time before the call: a record may be pushed before the
		// call returns.
		l.mu.Lock()
		l.put[data] = time.Now()
		l.mu.Unlock()
		if err := localaws.PutRecordsOn(ctx, client, stream, [][]byte{[]byte(data)}, func(int) string { return data }); err != nil {
			b.Fatal(err)
		}
	}
	put("warm-up")
	l.waitAll(b, 1, "polling", "fanout")
	l.mu.Lock()
	l.got = make(map[string][]time.Duration)
	l.mu.Unlock()

	tick := time.NewTicker(time.Second / latencyRate)
	defer tick.Stop()
	for i := range latencyRecords() {
		<-tick.C
		put(fmt.Sprintf("rec-%05d", i))
	}
	l.waitAll(b, latencyRecords(), "polling", "fanout")
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got["polling"], l.got["fanout"]
}
