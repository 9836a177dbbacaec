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
	benches := []struct {
		name  string
		build func(words *Stream[string], sink *int64)
		loop  func(sink *int64) func()
	}{{
		name:  "ReduceByKey",
		build: func(s *Stream[string], sink *int64) { sumPairs(ReduceByKey(Map(s, one), plus), sink) },
		loop: func(sink *int64) func() {
			counts := make(map[string]int64)
			return func() {
				clear(counts)
				words(func(w string) { counts[w]++ })
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
		loop: func(sink *int64) func() {
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
				words(func(w string) { cur[w]++ })
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
		loop: func(sink *int64) func() {
			last, cur := make(map[string]int64), make(map[string]int64)
			win := make(map[string]int64)
			return func() {
				last, cur = cur, last
				clear(cur)
				words(func(w string) { cur[w]++ })
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
		loop: func(sink *int64) func() {
			state := make(map[string]int64)
			return func() {
				words(func(w string) { state[w]++ })
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
		loop: func(sink *int64) func() {
			state := make(map[string]int64)
			return func() {
				words(func(w string) {
					state[w]++
					*sink += state[w]
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
				var sinkEngine, sinkLoop int64
				runPaired(b, block, func(s *Stream[string]) { bench.build(s, &sinkEngine) }, bench.loop(&sinkLoop), func(int) {
					if sinkEngine != sinkLoop {
						b.Fatalf("the engine added up to %d, the loop to %d", sinkEngine, sinkLoop)
					}
				})
			})
		}
	}
}
