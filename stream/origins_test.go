package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
)

// posRec is a record that knows its position, as the memory source numbers
// a shard's records: the record pushed k-th to a shard has sequence number
// k+1. Its sub-sequence number is made up, to be seen passed on.
type posRec struct{ Shard, Seq int }

func (r *posRec) Position() (string, int64) { return strconv.Itoa(r.Seq + 1), int64(r.Seq % 3) }

// fanRec is one of the records FlatMap makes of a posRec.
type fanRec struct {
	posRec
	K int
}

// TestOriginsThroughNarrowOperators checks that a ForEachBatch output
// declared with Origins sees, through Filter, FlatMap and Map, the source
// record each record came from and its index in the FlatMap's output,
// also when another output shares its stream; that an output without the
// option, and one after a shuffle, see none.
func TestOriginsThroughNarrowOperators(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n = 3, 900
		p, err := NewPipeline(Config{Parallelism: 2, BatchInterval: 50 * time.Millisecond, BlockInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[posRec](memory.Config{Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		recs := From(p, src)
		kept := Filter(recs, func(r posRec) bool { return r.Seq%5 != 0 })
		fanned := FlatMap(kept, func(r posRec) []fanRec {
			out := make([]fanRec, r.Seq%3)
			for k := range out {
				out[k] = fanRec{r, k}
			}
			return out
		})
		final := Map(fanned, func(r fanRec) fanRec { return r })
		var (
			mu     sync.Mutex
			got    int
			shared int // records of final another output saw, before

			bad      []string
			plainHas bool
			keyedHas bool
		)
		// final is shared: computed once for this output, before the one
		// with origins, which must not take it as it is.
		ForEachBatch(final, func(_ context.Context, b *batch.Batch[fanRec]) error {
			mu.Lock()
			defer mu.Unlock()
			shared += b.Len()
			return nil
		})
		ForEachBatch(final, func(_ context.Context, b *batch.Batch[fanRec]) error {
			mu.Lock()
			defer mu.Unlock()
			origins := b.Origins()
			if b.Len() > 0 && len(origins) != b.Len() {
				bad = append(bad, "a batch without its origins")
				return nil
			}
			i := 0
			for v := range b.All() {
				o := origins[i]
				want := batch.Origin{Stream: "memory", Shard: memory.ShardName(v.Shard), Seq: strconv.Itoa(v.Seq + 1), SubSeq: int64(v.Seq % 3), Index: v.K}
				if o != want {
					bad = append(bad, fmt.Sprintf("record %d %+v: origin %+v, want %+v", i, v, o, want))
				}
				i++
				got++
			}
			return nil
		}, Origins())
		ForEachBatch(Map(recs, func(r posRec) posRec { return r }), func(_ context.Context, b *batch.Batch[posRec]) error {
			mu.Lock()
			defer mu.Unlock()
			plainHas = plainHas || b.Origins() != nil
			return nil
		})
		pairs := Map(recs, func(r posRec) Pair[int, int] { return Pair[int, int]{Key: r.Shard, Value: 1} })
		ForEachBatch(ReduceByKey(pairs, func(a, b int) int { return a + b }), func(_ context.Context, b *batch.Batch[Pair[int, int]]) error {
			mu.Lock()
			defer mu.Unlock()
			keyedHas = keyedHas || b.Origins() != nil
			return nil
		}, Origins())

		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		want := 0
		for i := range n {
			r := posRec{i % shards, i / shards}
			if r.Seq%5 != 0 {
				want += r.Seq % 3
			}
			if err := src.Push(r); err != nil {
				t.Fatalf("Push: %v", err)
			}
			if i%37 == 0 {
				time.Sleep(7 * time.Millisecond)
			}
		}
		if err := p.Drain(context.Background()); err != nil {
			t.Fatalf("Drain: %v", err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(bad) > 0 {
			t.Fatalf("%d wrong origins, first %s", len(bad), bad[0])
		}
		if got != want || shared != want {
			t.Errorf("%d records output with origins, %d by the other output of their stream, want %d", got, shared, want)
		}
		if plainHas || keyedHas {
			t.Errorf("origins given without the option: %v; after a shuffle: %v", plainHas, keyedHas)
		}
	})
}

// TestOriginsForEachBatchOnly checks that Run refuses Origins on another
// output, naming it.
func TestOriginsForEachBatchOnly(t *testing.T) {
	p, src := newMemoryPipeline(t, Config{}, 1)
	ForEach(From(p, src), func(context.Context, shardRec) error { return nil }, Origins())
	err := p.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "Origins is an option of ForEachBatch only") {
		t.Fatalf("Run = %v, want the Origins option refused", err)
	}
}
