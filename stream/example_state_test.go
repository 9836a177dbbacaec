package stream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery/recoverytest"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// MapWithState keeps a running count per word and emits each word with
// its count so far; keys idle for StateTimeout would get one last call.
// With a recovery log (here in memory; recovery.Dir in production) the
// counts survive a crash exactly.
func ExampleMapWithState() {
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond, Recovery: recoverytest.Memory()})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	src.Push("a", "b", "a")
	pairs := stream.Map(stream.From(p, src), func(w string) stream.Pair[string, int] {
		return stream.Pair[string, int]{Key: w, Value: 1}
	})
	seen, counts := stream.MapWithState(pairs, func(w string, n int, st *stream.State[int]) (string, bool) {
		if st.IsTimingOut() {
			return w + " idle", true
		}
		st.Update(st.Get() + n)
		return fmt.Sprintf("%s #%d", w, st.Get()), true
	}, stream.StateTimeout(time.Minute))
	stream.ForEachBatch(seen, func(_ context.Context, b *batch.Batch[string]) error {
		if b.Len() > 0 {
			fmt.Println(b.Records())
		}
		return nil
	})
	stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
		if b.Len() > 0 {
			fmt.Println(b.Records())
		}
		return nil
	})
	if err := p.Drain(context.Background()); err != nil {
		fmt.Println(err)
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// [a #1 b #1 a #2]
	// [(a, 2) (b, 1)]
}

// UpdateStateByKey keeps a running count per word across batches. The
// update only adds the values up, so ReduceByKey adds each batch's up
// first, in parallel: update then gets one value per word and batch.
func ExampleUpdateStateByKey() {
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	src.Push("a", "b", "a")
	pairs := stream.Map(stream.From(p, src), func(w string) stream.Pair[string, int] {
		return stream.Pair[string, int]{Key: w, Value: 1}
	})
	perBatch := stream.ReduceByKey(pairs, func(a, b int) int { return a + b })
	totals := stream.UpdateStateByKey(perBatch, func(_ string, ns []int, total int, _ bool) (int, bool) {
		for _, n := range ns {
			total += n
		}
		return total, true
	})
	stream.ForEachBatch(totals, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
		fmt.Println(b.Records())
		return nil
	})
	if err := p.Drain(context.Background()); err != nil {
		fmt.Println(err)
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// [(a, 2) (b, 1)]
}
