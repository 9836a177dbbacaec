package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// Word count benchmarks: the framework against a plain loop over the same
// lines, so the ratio of their records/s is seen in one run. A record is a
// line of benchLineWords words drawn from a vocabulary of benchVocab words;
// every batch has benchLinesPerBatch lines in one block.
const (
	benchVocab         = 5000
	benchLineWords     = 10
	benchLinesPerBatch = 2000
	benchBlocks        = 8 // distinct pre-generated blocks, cycled
)

func benchLines() [][]string { return wordLines(1, benchBlocks, benchLinesPerBatch, benchLineWords) }

// wordLines returns n chunks of lines lines of words random words each,
// drawn from a vocabulary of benchVocab words, the same for the same seed:
// the input of the word count benchmarks.
func wordLines(seed uint64, n, lines, words int) [][]string {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	vocab := make([]string, benchVocab)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%x", rng.Uint32()%(1<<24))
	}
	chunks := make([][]string, n)
	for i := range chunks {
		chunk := make([]string, lines)
		for j := range chunk {
			line := make([]string, words)
			for k := range line {
				line[k] = vocab[rng.IntN(len(vocab))]
			}
			chunk[j] = strings.Join(line, " ")
		}
		chunks[i] = chunk
	}
	return chunks
}

func reportRecords(b *testing.B, batches int) {
	b.ReportMetric(float64(batches*benchLinesPerBatch)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkWordCountEngine measures the steady-state path of the driver for one
// batch: push a block through the source's PushFunc, cut the batch, run
// FlatMap(strings.Fields) -> CountByValue -> a sink, complete the batch.
// It drives the engine directly, without timers or goroutine hand-offs,
// which cost the same per batch whatever its size.
func BenchmarkWordCountEngine(b *testing.B) {
	blocks := benchLines()
	p, err := NewPipeline(Config{BatchInterval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	r := newTestReceiver[string]()
	counts := CountByValue(FlatMap(From(p, r), strings.Fields))
	var sink int64
	ForEachBatch(counts, func(_ context.Context, bt *batch.Batch[Pair[string, int64]]) error {
		for kv := range bt.All() {
			sink += kv.Value
		}
		return nil
	})
	ctx, cancel := context.WithCancelCause(b.Context())
	defer cancel(nil)
	p.mu.Lock()
	e := newEngine(p, cancel)
	p.mu.Unlock()
	e.log = noLog{}
	e.ctx = ctx
	e.sources[0].bind(e)
	src := e.sources[0].(*sourceState[string])
	t := batch.TimeOf(time.Now().Truncate(time.Second))
	n := 0
	for b.Loop() {
		if _, err := src.push(ctx, source.Block[string]{Records: blocks[n%len(blocks)]}); err != nil {
			b.Fatal(err)
		}
		t = t.Add(time.Second)
		j, err := e.cut(ctx, t)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.runJob(ctx, j); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportRecords(b, n)
	if want := int64(n * benchLinesPerBatch * benchLineWords); sink != want {
		b.Fatalf("counted %d words, want %d", sink, want)
	}
}

// BenchmarkWordCountEngineLoop is the baseline: the same word count per batch in a
// plain loop over the same lines.
func BenchmarkWordCountEngineLoop(b *testing.B) {
	blocks := benchLines()
	var sink int64
	n := 0
	for b.Loop() {
		counts := make(map[string]int64)
		for _, line := range blocks[n%len(blocks)] {
			for _, w := range strings.Fields(line) {
				counts[w]++
			}
		}
		for _, c := range counts {
			sink += c
		}
		n++
	}
	reportRecords(b, n)
	if want := int64(n * benchLinesPerBatch * benchLineWords); sink != want {
		b.Fatalf("counted %d words, want %d", sink, want)
	}
}
