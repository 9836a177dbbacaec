package stream_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// A word count: lines are split into words, counted per batch, and the
// counts printed. The source is source/memory, an in-process queue; Run's
// ctx is cancelled at once, as Ctrl-C would, so Run drains: the source
// pushes what it holds, the batch is processed, and Run returns nil.
func Example() {
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
	src.Push("to be or not to be", "that is the question")
	words := stream.FlatMap(stream.From(p, src), strings.Fields)
	counts := stream.CountByValue(words)
	stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		pairs := b.Records()
		slices.SortFunc(pairs, func(x, y stream.Pair[string, int64]) int {
			return cmp.Or(cmp.Compare(y.Value, x.Value), cmp.Compare(x.Key, y.Key))
		})
		for _, kv := range pairs {
			fmt.Println(kv)
		}
		return nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as Ctrl-C would, with signal.NotifyContext
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// (be, 2)
	// (to, 2)
	// (is, 1)
	// (not, 1)
	// (or, 1)
	// (question, 1)
	// (that, 1)
	// (the, 1)
}

// Every problem of a Config is reported at once, naming the field and the
// fix.
func ExampleNewPipeline_invalid() {
	_, err := stream.NewPipeline(stream.Config{
		BatchInterval:   time.Second,
		BlockInterval:   2 * time.Second,
		MaxQueuedBlocks: -1,
	})
	fmt.Println(err)
	// Output:
	// stream: invalid config: BlockInterval 2s: must be <= BatchInterval (1s)
	// MaxQueuedBlocks -1: must be >= 1 (or 0 for the default, 10)
}

// Window and ReduceByKeyAndWindow count over the last few batches; with an
// inverse function each window is computed from the previous one.
func ExampleReduceByKeyAndWindow() {
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
	add := func(x, y int) int { return x + y }
	sub := func(x, y int) int { return x - y }
	counts := stream.ReduceByKeyAndWindow(pairs, add, sub, 30*time.Millisecond, 10*time.Millisecond)
	stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
		if b.Len() > 0 {
			fmt.Println(b.Records())
		}
		return nil
	})
	if err := p.Validate(); err != nil {
		fmt.Println(err)
	}
	// Drain before Run: Run drains as soon as it has started the source.
	if err := p.Drain(context.Background()); err != nil {
		fmt.Println(err)
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// [(a, 2) (b, 1)]
}
