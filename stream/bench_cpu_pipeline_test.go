package stream_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// BenchmarkCPUEndToEnd is the CPU-bound pipeline of BenchmarkCPUPipeline
// (bench_cpu_test.go) through the whole framework: a memory source of 4
// shards, real timers, Map doing about 60 µs of SHA-256 per record, a
// ForEach, and the drain, at Parallelism 1 and 2 in one run:
//
//	go test -run x -bench 'CPUEndToEnd' -count 5 ./stream/
func BenchmarkCPUEndToEnd(b *testing.B) {
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("Parallelism=%d", par), func(b *testing.B) {
			p, err := stream.NewPipeline(stream.Config{BatchInterval: 20 * time.Millisecond, BlockInterval: 5 * time.Millisecond, Parallelism: par})
			if err != nil {
				b.Fatal(err)
			}
			src, err := memory.New[[]byte](memory.Config{Shards: 4, MaxQueued: 1000})
			if err != nil {
				b.Fatal(err)
			}
			var seen atomic.Int64
			hashed := stream.Map(stream.From(p, src), func(rec []byte) byte {
				h := sha256.Sum256(rec)
				for range 699 {
					h = sha256.Sum256(h[:])
				}
				return h[0]
			})
			stream.ForEach(hashed, func(context.Context, byte) error { seen.Add(1); return nil })
			done := make(chan error, 1)
			go func() { done <- p.Run(context.Background()) }()
			ctx := context.Background()
			rec := make([]byte, 64)
			b.ResetTimer()
			for i := range b.N {
				rec[0], rec[1] = byte(i), byte(i>>8)
				if err := src.Send(ctx, append([]byte(nil), rec...)); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.Drain(ctx); err != nil {
				b.Fatal(err)
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			if seen.Load() != int64(b.N) {
				b.Fatalf("saw %d records, want %d", seen.Load(), b.N)
			}
		})
	}
}
