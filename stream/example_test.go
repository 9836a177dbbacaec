package stream_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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
		BatchInterval:    time.Second,
		BlockInterval:    2 * time.Second,
		MaxBufferedBytes: 64, // meant 64 MiB: 64 << 20
	})
	fmt.Println(err)
	// Output:
	// stream: invalid config: BlockInterval 2s: must be <= BatchInterval (1s)
	// MaxBufferedBytes 64: must be at least 1048576 (1 MiB), or -1 for no limit, or 0 for the default (64 MiB); write a size in MiB as n<<20
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

// Per-shard processing, as a Kinesis Client Library record processor does
// it: ForEachPartition gets the records of one shard in a batch, in the
// order they were read, while the shards of the batch run in parallel. The
// memory source deals Push calls to its shards in turn.
func ExampleForEachPartition() {
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond, Parallelism: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := memory.New[string](memory.Config{Shards: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, order := range []string{"a1", "b1", "a2", "b2", "a3", "b3"} {
		src.Push(order) // a* to shard 0, b* to shard 1
	}
	var mu sync.Mutex
	seen := make(map[string][]string) // by shard
	stream.ForEachPartition(stream.From(p, src), func(_ context.Context, part stream.Partition[string]) error {
		mu.Lock() // partitions run concurrently
		defer mu.Unlock()
		seen[part.Shard] = append(seen[part.Shard], part.Records()...)
		return nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	for _, shard := range slices.Sorted(maps.Keys(seen)) {
		fmt.Println(shard, seen[shard])
	}
	// Output:
	// shardId-000000000000 [a1 a2 a3]
	// shardId-000000000001 [b1 b2 b3]
}
