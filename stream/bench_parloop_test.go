package stream

import (
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
)

// parLoop is the paired benchmarks' second baseline: the hand-written
// loop made parallel as a Go programmer would for a batch read from
// several shards, one goroutine per shard, as the engine runs one map task
// per shard. Goal 1 of the keyed shuffle compares the engine with the
// serial loop; this one says how much of that goal two goroutines written
// by hand reach on the same machine, in the same run.
type parLoop struct {
	shards [][]string         // the lines of each shard
	counts []map[string]int64 // each shard's counts, kept from batch to batch
	// buckets[s][p] are the words of shard s whose key hashes to bucket p,
	// in order; states[p] is the state of bucket p's keys.
	buckets [][][]string
	states  []map[string]int64
	seed    maphash.Seed
}

// newParLoop returns the parallel loop over lines, split into shards equal
// parts as wordBlockOf splits them, with runtime.GOMAXPROCS key buckets.
func newParLoop(shards int, lines []string) *parLoop {
	pl := &parLoop{seed: maphash.MakeSeed()}
	per := len(lines) / shards
	buckets := runtime.GOMAXPROCS(0)
	for s := range shards {
		pl.shards = append(pl.shards, lines[s*per:(s+1)*per])
		pl.counts = append(pl.counts, make(map[string]int64))
		pl.buckets = append(pl.buckets, make([][]string, buckets))
	}
	for range buckets {
		pl.states = append(pl.states, make(map[string]int64))
	}
	return pl
}

// count adds to m the number of times each word of the lines occurs: each
// shard's goroutine counts its own, and the counts are merged.
func (pl *parLoop) count(m map[string]int64) {
	var wg sync.WaitGroup
	for s, lines := range pl.shards {
		wg.Go(func() {
			c := pl.counts[s]
			clear(c)
			for _, line := range lines {
				for _, w := range strings.Fields(line) {
					c[w]++
				}
			}
		})
	}
	wg.Wait()
	for _, c := range pl.counts {
		for w, n := range c {
			m[w] += n
		}
	}
}

// byKey is a shuffle written by hand: each shard's goroutine splits its
// lines and puts each word in the bucket of its key's hash, then each
// bucket's goroutine calls f with the bucket's state and its words, shard
// by shard in order, so that every key's words come in batch order, from
// one goroutine. It returns the sum of f's results.
func (pl *parLoop) byKey(f func(state map[string]int64, words []string) int64) int64 {
	var wg sync.WaitGroup
	for s, lines := range pl.shards {
		wg.Go(func() {
			bk := pl.buckets[s]
			for p := range bk {
				bk[p] = bk[p][:0]
			}
			n := uint64(len(bk))
			for _, line := range lines {
				for _, w := range strings.Fields(line) {
					p := maphash.String(pl.seed, w) % n
					bk[p] = append(bk[p], w)
				}
			}
		})
	}
	wg.Wait()
	sums := make([]int64, len(pl.states))
	for p, state := range pl.states {
		wg.Go(func() {
			var sum int64
			for _, bk := range pl.buckets {
				sum += f(state, bk[p])
			}
			sums[p] = sum
		})
	}
	wg.Wait()
	var sum int64
	for _, s := range sums {
		sum += s
	}
	return sum
}
