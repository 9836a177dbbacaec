package stream

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestKeyedAfterMapAsWithBuffer checks that ReduceByKey and CountByValue
// right after a Map, which hands them each record as it makes it (the
// Map's fold), give every batch exactly what they give when a Filter
// keeping every record stands between (the Map's buffer, read chunk by
// chunk): the same pairs in the same order, with a reduce that is not
// commutative, so that the values of a key must be combined in record
// order too; over several shards and blocks, at Parallelism 1 and 2.
func TestKeyedAfterMapAsWithBuffer(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("Parallelism %d", par), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const shards, n = 3, 400
				p, src := newMemoryPipeline(t, Config{Parallelism: par, BatchInterval: 20 * time.Millisecond, BlockInterval: 5 * time.Millisecond}, shards)
				recs := From(p, src)
				toPair := func(r shardRec) Pair[int, string] {
					return Pair[int, string]{Key: r.Seq % 7, Value: fmt.Sprint(r.Shard, r.Seq, ";")}
				}
				concat := func(a, b string) string { return a + b }
				all := func(Pair[int, string]) bool { return true }
				// Each Map has one consumer, so that it is fused into it.
				reduceFold := collect(ReduceByKey(Map(recs, toPair), concat))
				reduceBuffer := collect(ReduceByKey(Filter(Map(recs, toPair), all), concat))
				key := func(r shardRec) string { return fmt.Sprint(r.Seq % 5) }
				countFold := collect(CountByValue(Map(recs, key)))
				countBuffer := collect(CountByValue(Filter(Map(recs, key), func(string) bool { return true })))
				if err := runMemory(t, p, src, shards, n); err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				if n := len(reduceBuffer.outs()); n < 3 {
					t.Fatalf("%d batches: the test feeds too few", n)
				}
				if diff := cmp.Diff(reduceBuffer.outs(), reduceFold.outs()); diff != "" {
					t.Errorf("ReduceByKey after a Map (-with buffer +handed each record):\n%s", diff)
				}
				if diff := cmp.Diff(countBuffer.outs(), countFold.outs()); diff != "" {
					t.Errorf("CountByValue after a Map (-with buffer +handed each record):\n%s", diff)
				}
			})
		})
	}
}
