package repartition

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/localaws"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// BenchmarkByKey is the time, from the pipeline's construction, to count
// the records of each key of a 4-shard kinesalite stream (20000 records, 37
// keys) with UpdateStateByKey, on one worker: "direct" on the source's
// records, "repartition" after ByKey through a new 4-shard stream (created
// in the timed part), "repartition+leases" the same with leases on both
// streams (lease tables on dynalite; the count's state kept per shard). The goal is repartition at 0.5x direct's
// throughput or better: compare the records/s. Under -short (scripts/test's
// smoke run, which measures nothing) the stream holds 4000 records.
//
//	go test -run x -bench ByKey -benchtime 3x ./repartition/
func BenchmarkByKey(b *testing.B) {
	env := servers.Env(b)
	n := 20000
	if testing.Short() {
		n = 4000
	}
	in := putInput(b, env, 4, n)
	for _, tc := range []struct {
		name                string
		repartition, leases bool
	}{{"direct", false, false}, {"repartition", true, false}, {"repartition+leases", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
			defer cancel()
			start := time.Now()
			for b.Loop() {
				var cfg *Config[string, int64]
				if tc.repartition {
					cfg = &Config[string, int64]{Stream: localaws.UniqueName(b), Shards: 4}
				}
				if tc.leases {
					// Leases on both streams, as a fleet runs: the count
					// after ByKey keeps its state per shard.
					cfg.Writer = "worker-1"
					cfg.Leases = &leasetable.Config{Endpoint: env.DynamoDBEndpoint, StateDir: b.TempDir()}
				}
				if got := runCount(ctx, b, env, in, n, cfg); len(got) != 37 {
					b.Fatalf("%d keys counted, want 37", len(got))
				}
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkByKeyLatency is the latency ByKey adds: a producer puts records
// at a steady rate (200 records/s, over 37 keys) on a 4-shard kinesalite
// stream, each holding its put time, and a pipeline with default settings
// (1 s batches, the receiver's default polling) measures, at its output,
// how long after its put each record arrived: "direct" on the source's
// records, "repartition" after ByKey through a new 4-shard stream. It
// reports the p50 and p99 in milliseconds. WEIR_LATENCY_SECONDS sets how
// long the producer runs (default 3; 1 under -short, scripts/test's smoke
// run).
//
//	WEIR_LATENCY_SECONDS=30 go test -run x -bench ByKeyLatency -benchtime 1x ./repartition/
func BenchmarkByKeyLatency(b *testing.B) {
	env := servers.Env(b)
	seconds := 3
	if testing.Short() {
		seconds = 1
	}
	if s, err := strconv.Atoi(os.Getenv("WEIR_LATENCY_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	const rate = 200
	for _, tc := range []struct {
		name        string
		repartition bool
	}{{"direct", false}, {"repartition", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, measureLatency(b, env, tc.repartition, seconds*rate, rate)...)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
		})
	}
}

// measureLatency runs one pipeline while n records are put at rate per
// second and returns each record's latency, put to output.
func measureLatency(b *testing.B, env *localaws.Env, repartition bool, n, rate int) []time.Duration {
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	in := localaws.UniqueName(b)
	if err := env.CreateStream(ctx, in, 4); err != nil {
		b.Fatal(err)
	}
	awsCfg := env.AWSConfig()
	recv, err := source.New(source.Config{Stream: in, App: localaws.UniqueName(b), InitialPosition: source.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint})
	if err != nil {
		b.Fatal(err)
	}
	p, err := stream.NewPipeline(stream.Config{})
	if err != nil {
		b.Fatal(err)
	}
	pairs := stream.Map(stream.From(p, recv), func(r source.Record) stream.Pair[string, int64] {
		key, ts, _ := strings.Cut(string(r.Data), ",")
		nanos, _ := strconv.ParseInt(ts, 10, 64)
		return stream.Pair[string, int64]{Key: key, Value: nanos}
	})
	if repartition {
		if pairs, err = ByKey(ctx, pairs, Config[string, int64]{Stream: localaws.UniqueName(b), Shards: 4, AWS: &awsCfg, Endpoint: env.KinesisEndpoint}); err != nil {
			b.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		lat  []time.Duration
		done = make(chan struct{})
	)
	stream.ForEachBatch(pairs, func(_ context.Context, bt *batch.Batch[stream.Pair[string, int64]]) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for kv := range bt.All() {
			lat = append(lat, now.Sub(time.Unix(0, kv.Value)))
		}
		if len(lat) >= n && done != nil {
			close(done)
			done = nil
		}
		return nil
	})
	runUntil(ctx, b, p, done, func() {
		tick := time.NewTicker(time.Second / 10)
		defer tick.Stop()
		for put := 0; put < n; {
			<-tick.C
			batch := make([][]byte, 0, rate/10)
			for range rate / 10 {
				batch = append(batch, fmt.Appendf(nil, "%s,%d", keyOf(put), time.Now().UnixNano()))
				put++
			}
			if err := env.PutRecords(ctx, in, batch, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	mu.Lock()
	defer mu.Unlock()
	return lat
}
