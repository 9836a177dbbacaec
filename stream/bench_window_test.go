package stream

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
)

// BenchmarkWindowSlide times the kept window of a ReduceByKeyAndWindow with
// an inverse moving by one slide: a window of 10 batches of keys=N
// distinct keys each, of which each batch shares half with the batch
// before it, so that every slide takes a batch's keys out, drops the keys
// no batch in the window has any more and adds the new batch's keys:
//
//	go test -run '^$' -bench WindowSlide -benchmem ./stream
func BenchmarkWindowSlide(b *testing.B) {
	for _, keys := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			const slide, batches = time.Second, 10
			names := make([]string, keys*(batches+1)) // enough for the window and the next batch, reused round robin
			for i := range names {
				names[i] = "key-" + strconv.Itoa(i)
			}
			batchAt := func(n int) *batch.Batch[Pair[string, int64]] {
				ps := make([]Pair[string, int64], keys)
				for i := range ps {
					ps[i] = Pair[string, int64]{Key: names[(n*keys/2+i)%len(names)], Value: 1}
				}
				return batch.New(batch.Time(int64(n)*slide.Milliseconds()), nil, ps)
			}
			w := &windowReduce[string, int64]{
				reduce:  func(a, b int64) int64 { return a + b },
				inverse: func(a, b int64) int64 { return a - b },
				length:  batches * slide, slide: slide,
			}
			n := 0
			add := func() {
				w.h.bs = append(w.h.bs, batchAt(n))
				if len(w.h.bs) > batches+1 {
					w.h.bs = w.h.bs[1:]
				}
				w.slideTo(batch.Time(int64(n) * slide.Milliseconds()))
				n++
			}
			for range batches + 1 {
				add()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				add()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys), "ns/key")
		})
	}
}
