package stream_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/stream"
)

// lines is a minimal receiver: it pushes its lines as one block, then waits
// to be stopped. Real sources (source/memory, source/kinesis) use a
// source.BlockGenerator instead.
type lines struct {
	lines []string
	once  sync.Once
	stop  chan struct{}
}

func newLines(ls ...string) *lines { return &lines{lines: ls, stop: make(chan struct{})} }

func (l *lines) Start(ctx context.Context, rt source.Runtime[string]) error {
	if _, err := rt.Push(ctx, source.Block[string]{Records: l.lines}); err != nil {
		return err
	}
	select {
	case <-l.stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lines) Stop(context.Context) error {
	l.once.Do(func() { close(l.stop) })
	return nil
}

func (l *lines) Recompute(context.Context, batch.BlockInfo) ([]string, error) {
	return l.lines, nil
}

// A word count: lines are split into words, counted per batch, and the
// counts printed. Drain lets the pipeline finish what was pushed.
func Example() {
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	src := newLines("to be or not to be", "that is the question")
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

	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	p.Drain(context.Background()) // stop the source, process what it pushed, stop
	if err := <-done; err != nil {
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
	pairs := stream.Map(stream.From(p, newLines("a", "b", "a")), func(w string) stream.Pair[string, int] {
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
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	p.Drain(context.Background())
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	// Output:
	// [(a, 2) (b, 1)]
}
