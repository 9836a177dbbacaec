package stream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// The word count benchmarks: the whole framework as a user runs it (memory
// source -> FlatMap -> CountByValue -> sink, real timers, every goroutine
// hand-off), against the same count in a plain loop, in one run:
//
//	go test -run x -bench 'WordCount(Loop)?$' -count 5 ./stream/
//
// (BenchmarkWordCountEngine and its loop, in bench_test.go, measure the
// driver's per-batch path alone.)
//
// Each iteration is a chunk of e2eChunk lines; the framework benchmark sends
// the chunks through the memory source while the pipeline runs, then drains,
// so its time includes the tail of the last batch. At -benchtime 1x the
// figure is dominated by the final batch wait and means nothing.
const (
	e2eChunk     = 1000
	e2eLineWords = 10
)

func e2eLines(n int) [][]string { return stream.WordLines(3, n, e2eChunk, e2eLineWords) }

func BenchmarkWordCount(b *testing.B) {
	chunks := e2eLines(16)
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 20 * time.Millisecond, BlockInterval: 5 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	src, err := memory.New[string](memory.Config{Shards: 2, MaxQueued: 20 * e2eChunk})
	if err != nil {
		b.Fatal(err)
	}
	var words int64 // only the output touches it, one batch at a time
	counts := stream.CountByValue(stream.FlatMap(stream.From(p, src), strings.Fields))
	stream.ForEachBatch(counts, func(_ context.Context, bt *batch.Batch[stream.Pair[string, int64]]) error {
		for kv := range bt.All() {
			words += kv.Value
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	ctx := context.Background()
	// Not b.Loop: the timed region must include the drain, which processes
	// what is still queued when the last Send returns.
	b.ResetTimer()
	n := b.N
	for i := range n {
		if err := src.Send(ctx, chunks[i%len(chunks)]...); err != nil {
			b.Fatal(err)
		}
	}
	p.Drain(context.Background())
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(n*e2eChunk)/b.Elapsed().Seconds(), "records/s")
	if want := int64(n * e2eChunk * e2eLineWords); words != want {
		b.Fatalf("counted %d words, want %d", words, want)
	}
}

// BenchmarkWordCountLoop is the baseline of BenchmarkWordCount: the
// same count over the same chunks in a plain loop, on one goroutine, with
// one map cleared per chunk (so it does not pay for growing a new map).
func BenchmarkWordCountLoop(b *testing.B) {
	chunks := e2eLines(16)
	var words int64
	n := 0
	counts := make(map[string]int64)
	for b.Loop() {
		clear(counts)
		for _, line := range chunks[n%len(chunks)] {
			for _, w := range strings.Fields(line) {
				counts[w]++
			}
		}
		for _, c := range counts {
			words += c
		}
		n++
	}
	b.ReportMetric(float64(n*e2eChunk)/b.Elapsed().Seconds(), "records/s")
	if want := int64(n * e2eChunk * e2eLineWords); words != want {
		b.Fatalf("counted %d words, want %d", words, want)
	}
}
