package stream

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// The CPU-bound benchmarks: a batch of records from cpuShards shards whose
// every record costs cpuRounds SHA-256 rounds (about 60 µs here), run by
// the engine at Parallelism 1 and 2 and by a hand-written parallel loop over
// the same records, in one run:
//
//	go test -run x -bench 'CPU' -count 5 ./stream/
//
// Parallelism=2 over Parallelism=1 is the engine's speed-up on 2 cores;
// the engine over the loop with as many goroutines is its overhead. Like
// BenchmarkWordCountEngine, they drive the engine batch by batch, without
// timers, so that only the batch's work is timed.
const (
	cpuShards    = 4
	cpuPerShard  = 50 // records of a shard in a batch
	cpuRounds    = 700
	cpuRecordLen = 64
)

// cpuWork is the per-record work: cpuRounds rounds of SHA-256.
func cpuWork(rec []byte) byte {
	h := sha256.Sum256(rec)
	for range cpuRounds - 1 {
		h = sha256.Sum256(h[:])
	}
	return h[0]
}

// cpuBlock returns a block of cpuShards*cpuPerShard records read from
// cpuShards shards, interleaved in reads of 10 records as a receiver
// reading every shard would add them, with the ranges that say so.
func cpuBlock() source.Block[[]byte] {
	var b source.Block[[]byte]
	seq := make([]int, cpuShards)
	for len(b.Records) < cpuShards*cpuPerShard {
		for s := range cpuShards {
			first := seq[s]
			for range 10 {
				rec := fmt.Appendf(nil, "shard %d record %d ", s, seq[s])
				b.Records = append(b.Records, append(rec, make([]byte, cpuRecordLen-len(rec))...))
				seq[s]++
			}
			b.Ranges = append(b.Ranges, batch.SeqRange{Stream: "cpu", Shard: "shard-" + strconv.Itoa(s),
				First: strconv.Itoa(first + 1), Last: strconv.Itoa(seq[s]), Count: 10})
		}
	}
	return b
}

func BenchmarkCPUPipeline(b *testing.B) {
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("Parallelism=%d", par), func(b *testing.B) {
			block := cpuBlock()
			p, sink := cpuPipeline(b, par)
			n := driveEngine(b, p, block)
			b.ReportMetric(float64(n*len(block.Records))/b.Elapsed().Seconds(), "records/s")
			if want := cpuSum(block.Records) * int64(n); sink.Load() != want {
				b.Fatalf("sum %d, want %d", sink.Load(), want)
			}
		})
	}
}

// cpuPipeline returns a pipeline that hashes the records of its source,
// a test receiver, and adds the results up in the returned sink.
func cpuPipeline(b *testing.B, par int) (*Pipeline, *atomic.Int64) {
	p, err := NewPipeline(Config{BatchInterval: time.Second, Parallelism: par})
	if err != nil {
		b.Fatal(err)
	}
	sink := new(atomic.Int64)
	hashed := Map(From(p, newTestReceiver[[]byte]()), cpuWork)
	ForEach(hashed, func(_ context.Context, v byte) error { sink.Add(int64(v)); return nil })
	return p, sink
}

// BenchmarkCPUPaired runs, in every iteration, one batch of each of
// BenchmarkCPUPipeline's and BenchmarkCPULoop's variants, one after the
// other, and reports the ratios of their total times: measured side by
// side, they drift together when other processes load the machine.
// speedup-2/1 is Parallelism=2 over Parallelism=1, engine/loop-N the
// engine's throughput over the loop's with N goroutines.
func BenchmarkCPUPaired(b *testing.B) {
	block := cpuBlock()
	var run [4]func()
	for i, par := range []int{1, 2} {
		p, _ := cpuPipeline(b, par)
		run[i] = engineStepper(b, p, block)
		var sink atomic.Int64
		run[2+i] = cpuLoopStepper(block, par, &sink)
	}
	var took, cpu [4]time.Duration
	for b.Loop() {
		for i, f := range run {
			start, startCPU := time.Now(), processCPU()
			f()
			took[i] += time.Since(start)
			cpu[i] += processCPU() - startCPU
		}
	}
	b.ReportMetric(float64(took[0])/float64(took[1]), "speedup-2/1")
	b.ReportMetric(float64(took[2])/float64(took[0]), "engine/loop-1")
	b.ReportMetric(float64(took[3])/float64(took[1]), "engine/loop-2")
	if cpu[0] > 0 {
		// CPU time of the loop over that of the engine, for the same work:
		// the engine's overhead, whatever the load.
		b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "cpu-engine/loop-1")
		b.ReportMetric(float64(cpu[3])/float64(cpu[1]), "cpu-engine/loop-2")
	}
}

// BenchmarkCPULoop is the baseline of BenchmarkCPUPipeline: the same work
// on the same records of each batch, by a hand-written loop with one
// goroutine per shard, at most goroutines at once.
func BenchmarkCPULoop(b *testing.B) {
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			block := cpuBlock()
			var sink atomic.Int64
			step := cpuLoopStepper(block, par, &sink)
			n := 0
			for b.Loop() {
				step()
				n++
			}
			b.ReportMetric(float64(n*len(block.Records))/b.Elapsed().Seconds(), "records/s")
			if want := cpuSum(block.Records) * int64(n); sink.Load() != want {
				b.Fatalf("sum %d, want %d", sink.Load(), want)
			}
		})
	}
}

// cpuLoopStepper returns the hand-written loop's batch: the records of
// block, split by shard as a receiver per shard holds them, hashed by one
// goroutine per shard, at most par at once, the results added to sink.
func cpuLoopStepper(block source.Block[[]byte], par int, sink *atomic.Int64) func() {
	byShard := make([][][]byte, cpuShards)
	recs := block.Records
	for _, rg := range block.Ranges {
		s, _ := strconv.Atoi(rg.Shard[len("shard-"):])
		byShard[s] = append(byShard[s], recs[:rg.Count]...)
		recs = recs[rg.Count:]
	}
	sem := make(chan struct{}, par)
	return func() {
		var wg sync.WaitGroup
		for _, shard := range byShard {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				var sum int64
				for _, r := range shard {
					sum += int64(cpuWork(r))
				}
				sink.Add(sum)
			})
		}
		wg.Wait()
	}
}

func cpuSum(recs [][]byte) int64 {
	var sum int64
	for _, r := range recs {
		sum += int64(cpuWork(r))
	}
	return sum
}

// driveEngine runs p's engine for b.Loop: each iteration pushes block to
// p's only source, cuts the batch and runs it. It returns the number of
// batches run.
func driveEngine[T any](b *testing.B, p *Pipeline, block source.Block[T]) int {
	b.Helper()
	step := engineStepper(b, p, block)
	n := 0
	for b.Loop() {
		step()
		n++
	}
	return n
}

// engineStepper returns a function that runs one batch of p's engine:
// push block to p's only source, cut the batch and run it.
func engineStepper[T any](b *testing.B, p *Pipeline, block source.Block[T]) func() {
	b.Helper()
	ctx, cancel := context.WithCancelCause(b.Context())
	b.Cleanup(func() { cancel(nil) })
	p.mu.Lock()
	e := newEngine(p, cancel)
	p.mu.Unlock()
	e.log = noLog{}
	e.ctx = ctx
	e.sources[0].bind(e)
	src := e.sources[0].(*sourceState[T])
	t := batch.TimeOf(time.Now().Truncate(time.Second))
	return func() {
		if _, err := src.push(ctx, block); err != nil {
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
	}
}

// BenchmarkWordCountPaired is BenchmarkWordCountEngine and its loop,
// pairedRuns batches of each per iteration (see runPaired), reporting the ratio of their total times
// (engine/loop, > 1 when the engine is faster) and of their CPU times
// (cpu-engine/loop, the loop's over the engine's): measured side by side,
// the two drift together when other processes load the machine. With
// shards=2 the block holds the lines of two shards, so the count runs as a
// shuffle of two partitions; shards=2/lines=20000 is that shuffle with ten
// times the lines in the batch. The keyed operators other than
// CountByValue are paired the same way, in BenchmarkKeyedPaired.
//
//	go test -run '^$' -bench 'WordCountPaired' -count 5 ./stream
func BenchmarkWordCountPaired(b *testing.B) {
	type size struct {
		name   string
		shards int
		lines  []string
	}
	sizes := []size{{"shards=1", 1, benchLines()[0]}, {"shards=2", 2, benchLines()[0]},
		{fmt.Sprintf("shards=2/lines=%d", bigBatchLines), 2, wordLines(1, 1, bigBatchLines, benchLineWords)[0]}}
	for _, sz := range sizes {
		b.Run(sz.name, func(b *testing.B) {
			lines, block := wordBlockOf(sz.shards, sz.lines)
			var sink int64
			// countAll is the loops' batch: count the words with count,
			// then add the counts up.
			countAll := func(count func(map[string]int64)) func() {
				counted := make(map[string]int64)
				return func() {
					clear(counted)
					count(counted)
					for _, c := range counted {
						sink += c
					}
				}
			}
			var par func()
			if sz.shards > 1 {
				par = countAll(newParLoop(sz.shards, lines).count)
			}
			runPaired(b, block, func(words *Stream[string]) {
				counts := CountByValue(words)
				ForEachBatch(counts, func(_ context.Context, bt *batch.Batch[Pair[string, int64]]) error {
					for kv := range bt.All() {
						sink += kv.Value
					}
					return nil
				})
			}, countAll(countWords(lines)), par, func(n int) {
				arms := 2
				if par != nil {
					arms = 3
				}
				if want := int64(arms * n * len(lines) * benchLineWords); sink != want {
					b.Fatalf("counted %d words, want %d", sink, want)
				}
			})
		})
	}
}

// countWords returns the serial loop's count: add to m the number of times
// each word of lines occurs.
func countWords(lines []string) func(m map[string]int64) {
	return func(m map[string]int64) {
		for _, line := range lines {
			for _, w := range strings.Fields(line) {
				m[w]++
			}
		}
	}
}

// pairedRuns is how many batches of each arm runPaired runs in a row,
// timed as one. The arms share the collector: a collection that one arm's
// garbage starts runs, in part, in the time of the arm that is running,
// the next one if that arm ran one batch. Where collections fell then
// depended on the heap's size: with one batch of each arm per iteration,
// a build of the same code that only imported one package more (holding
// more memory from its start) moved the ratios by up to 0.25 at 20,000
// lines. With 8 in a row each arm pays for most of its own collections.
// WEIR_PAIRED_RUNS sets another number, 1 to see the effect.
var pairedRuns = 8

func init() {
	if n, err := strconv.Atoi(os.Getenv("WEIR_PAIRED_RUNS")); err == nil && n > 0 {
		pairedRuns = n
	}
}

// bigBatchLines is the lines of the paired benchmarks' large batch, ten
// times the others': the cost of the shuffle per record, with the cost of
// a batch itself (starting its tasks and waiting for them, which takes
// 0.1-0.2 ms per stage on a virtual machine, see BenchmarkParallelStart)
// spread over ten times the records.
const bigBatchLines = 10 * benchLinesPerBatch

// wordBlockOf returns lines and a block of them read from shards shards,
// in equal parts (no ranges for one shard).
func wordBlockOf(shards int, lines []string) ([]string, source.Block[string]) {
	block := source.Block[string]{Records: lines}
	if shards > 1 {
		per := len(lines) / shards
		for s := range shards {
			block.Ranges = append(block.Ranges, batch.SeqRange{Stream: "words", Shard: "shard-" + strconv.Itoa(s),
				First: "1", Last: strconv.Itoa(per), Count: per})
		}
	}
	return lines, block
}

// runPaired runs a paired benchmark: a pipeline of the batch interval
// that build completes from the words of block's lines, loop, the same
// work by hand on the same lines, and par, if not nil, that work by hand on
// one goroutine per shard (parLoop), pairedRuns batches of each per
// iteration, timed apart. It reports engine/loop (wall time) and cpu-engine/loop (CPU time,
// the loop's over the engine's); with par, also engine/parloop and
// cpu-engine/parloop, the engine against par, and parloop/loop, par's
// speed-up over the loop. Then it calls check with the number of
// batches each arm ran.
func runPaired(b *testing.B, block source.Block[string], build func(words *Stream[string]), loop, par func(), check func(n int)) {
	p, err := NewPipeline(Config{BatchInterval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	build(FlatMap(From(p, newTestReceiver[string]()), strings.Fields))
	arms := []func(){engineStepper(b, p, block), loop}
	if par != nil {
		arms = append(arms, par)
	}
	took, cpu := make([]time.Duration, len(arms)), make([]time.Duration, len(arms))
	n := 0
	for b.Loop() {
		for i, arm := range arms {
			start, startCPU := time.Now(), processCPU()
			for range pairedRuns {
				arm()
			}
			took[i] += time.Since(start)
			cpu[i] += processCPU() - startCPU
		}
		n += pairedRuns
	}
	b.ReportMetric(float64(took[1])/float64(took[0]), "engine/loop")
	if cpu[0] > 0 {
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-engine/loop")
	}
	if par != nil {
		b.ReportMetric(float64(took[2])/float64(took[0]), "engine/parloop")
		if cpu[0] > 0 {
			b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "cpu-engine/parloop")
		}
		b.ReportMetric(float64(took[1])/float64(took[2]), "parloop/loop")
	}
	check(n)
}
