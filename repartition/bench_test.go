package repartition

import (
	"context"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws"
)

// BenchmarkByKey is the time, from the pipeline's construction, to count
// the records of each key of a 4-shard kinesalite stream (20000 records, 37
// keys) with UpdateStateByKey, on one worker: "direct" on the source's
// records, "repartition" after ByKey through a new 4-shard stream (created
// in the timed part). The goal is repartition at 0.5x direct's
// throughput or better: compare the records/s.
//
//	go test -run x -bench ByKey -benchtime 3x ./repartition/
func BenchmarkByKey(b *testing.B) {
	env := servers.Env(b)
	const n = 20000
	in := putInput(b, env, 4, n)
	for _, tc := range []struct {
		name        string
		repartition bool
	}{{"direct", false}, {"repartition", true}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
			defer cancel()
			start := time.Now()
			for b.Loop() {
				var cfg *Config[string, int64]
				if tc.repartition {
					cfg = &Config[string, int64]{Stream: localaws.UniqueName(b), Shards: 4}
				}
				if got := runCount(ctx, b, env, in, n, cfg); len(got) != 37 {
					b.Fatalf("%d keys counted, want 37", len(got))
				}
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}
