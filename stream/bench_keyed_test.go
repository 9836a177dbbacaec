package stream

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// BenchmarkKeyedPaired pairs the keyed operators other than CountByValue
// (BenchmarkWordCountPaired's) with a hand-written loop doing the same
// aggregation on the same words, as BenchmarkWordCountPaired does, over a
// block of two shards, of a batch's lines as the other benchmarks have them
// and of ten times as many (lines=20000):
//
//	go test -run '^$' -bench 'KeyedPaired' -count 5 ./stream
//
// Each checks that the engine and the loop add up to the same sum.
func BenchmarkKeyedPaired(b *testing.B) {
	one := func(w string) Pair[string, int64] { return Pair[string, int64]{w, 1} }
	plus := func(a, b int64) int64 { return a + b }
	minus := func(a, b int64) int64 { return a - b }
	// sumPairs adds the values of each batch of s up in sink.
	sumPairs := func(s *Stream[Pair[string, int64]], sink *int64) {
		ForEachBatch(s, func(_ context.Context, bt *batch.Batch[Pair[string, int64]]) error {
			for kv := range bt.All() {
				*sink += kv.Value
			}
			return nil
		})
	}
	var lines []string
	words := func(yield func(string)) {
		for _, line := range lines {
			for _, w := range strings.Fields(line) {
				yield(w)
			}
		}
	}
	// loop is a hand-written loop's batch, which counts words with count
	// (countWords, or the parallel loop's parLoop.count); par, when set, is
	// the parallel loop's batch, when it is not loop counting in parallel.
	benches := []struct {
		name  string
		build func(words *Stream[string], sink *int64)
		loop  func(sink *int64, count func(map[string]int64)) func()
		par   func(sink *int64, pl *parLoop) func()
	}{{
		name:  "ReduceByKey",
		build: func(s *Stream[string], sink *int64) { sumPairs(ReduceByKey(Map(s, one), plus), sink) },
		loop: func(sink *int64, count func(map[string]int64)) func() {
			counts := make(map[string]int64)
			return func() {
				clear(counts)
				count(counts)
				for _, c := range counts {
					*sink += c
				}
			}
		},
	}, {
		// The counts of the last two batches, kept with the inverse.
		name: "ReduceByKeyAndWindow",
		build: func(s *Stream[string], sink *int64) {
			sumPairs(ReduceByKeyAndWindow(Map(s, one), plus, minus, 2*time.Second, time.Second), sink)
		},
		loop: func(sink *int64, count func(map[string]int64)) func() {
			win := make(map[string]int64)
			last, older := make(map[string]int64), make(map[string]int64)
			return func() {
				for w, c := range older {
					if win[w] -= c; win[w] == 0 {
						delete(win, w)
					}
				}
				cur := older
				clear(cur)
				count(cur)
				for w, c := range cur {
					win[w] += c
				}
				last, older = cur, last
				for _, c := range win {
					*sink += c
				}
			}
		},
	}, {
		// The same window without an inverse: each window is reduced
		// from the counts of its two batches.
		name: "ReduceByKeyAndWindow/noinverse",
		build: func(s *Stream[string], sink *int64) {
			sumPairs(ReduceByKeyAndWindow(Map(s, one), plus, nil, 2*time.Second, time.Second), sink)
		},
		loop: func(sink *int64, count func(map[string]int64)) func() {
			last, cur := make(map[string]int64), make(map[string]int64)
			win := make(map[string]int64)
			return func() {
				last, cur = cur, last
				clear(cur)
				count(cur)
				clear(win)
				for _, m := range []map[string]int64{last, cur} {
					for w, c := range m {
						win[w] += c
					}
				}
				for _, c := range win {
					*sink += c
				}
			}
		},
	}, {
		// Running counts: the state of a key is its count so far.
		name: "UpdateStateByKey",
		build: func(s *Stream[string], sink *int64) {
			sumPairs(UpdateStateByKey(Map(s, one), func(_ string, vs []int64, n int64, _ bool) (int64, bool) {
				for _, v := range vs {
					n += v
				}
				return n, true
			}), sink)
		},
		loop: func(sink *int64, count func(map[string]int64)) func() {
			state := make(map[string]int64)
			return func() {
				count(state)
				for _, c := range state {
					*sink += c
				}
			}
		},
	}, {
		// The same running counts, each batch's values of a key reduced
		// to one first, as UpdateStateByKey's documentation advises when
		// update only folds its values.
		name: "UpdateStateByKey/reduced",
		build: func(s *Stream[string], sink *int64) {
			sumPairs(UpdateStateByKey(ReduceByKey(Map(s, one), plus), func(_ string, vs []int64, n int64, _ bool) (int64, bool) {
				for _, v := range vs {
					n += v
				}
				return n, true
			}), sink)
		},
		loop: func(sink *int64, count func(map[string]int64)) func() {
			state := make(map[string]int64)
			return func() {
				count(state)
				for _, c := range state {
					*sink += c
				}
			}
		},
	}, {
		// Each word emits its running count.
		name: "MapWithState",
		build: func(s *Stream[string], sink *int64) {
			counts, _ := MapWithState(Map(s, one), func(_ string, v int64, st *State[int64]) (int64, bool) {
				st.Update(st.Get() + v)
				return st.Get(), true
			})
			ForEachBatch(counts, func(_ context.Context, bt *batch.Batch[int64]) error {
				for n := range bt.All() {
					*sink += n
				}
				return nil
			})
		},
		loop: func(sink *int64, _ func(map[string]int64)) func() {
			state := make(map[string]int64)
			return func() {
				words(func(w string) {
					state[w]++
					*sink += state[w]
				})
			}
		},
		// Each key's words in batch order, from one goroutine per bucket
		// of keys.
		par: func(sink *int64, pl *parLoop) func() {
			return func() {
				*sink += pl.byKey(func(state map[string]int64, words []string) int64 {
					var sum int64
					for _, w := range words {
						state[w]++
						sum += state[w]
					}
					return sum
				})
			}
		},
	}}
	small, big := benchLines()[0], wordLines(1, 1, bigBatchLines, benchLineWords)[0]
	for _, bench := range benches {
		for _, size := range []string{"", fmt.Sprintf("/lines=%d", bigBatchLines)} {
			b.Run(bench.name+"/shards=2"+size, func(b *testing.B) {
				lines = small
				if size != "" {
					lines = big
				}
				var block source.Block[string]
				lines, block = wordBlockOf(2, lines)
				var sinkEngine, sinkLoop, sinkPar int64
				pl := newParLoop(2, lines)
				par := bench.loop(&sinkPar, pl.count)
				if bench.par != nil {
					par = bench.par(&sinkPar, pl)
				}
				runPaired(b, block, func(s *Stream[string]) { bench.build(s, &sinkEngine) }, bench.loop(&sinkLoop, countWords(lines)), par, func(int) {
					if sinkEngine != sinkLoop || sinkPar != sinkLoop {
						b.Fatalf("the engine added up to %d, the loop to %d, the parallel loop to %d", sinkEngine, sinkLoop, sinkPar)
					}
				})
			})
		}
	}
}
