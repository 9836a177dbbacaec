package source_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/stream"
)

// numbers is a Receiver of the integers 1 to n, read from one shard of a
// stream "numbers" in which each integer is its own sequence number, so a
// range names its records exactly and Recompute can make them again.
type numbers struct {
	n    int
	once sync.Once
	stop chan struct{} // closed by Stop
	done chan struct{} // closed when Start returns
}

func newNumbers(n int) *numbers {
	return &numbers{n: n, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start adds every record with the range it was read from to a
// BlockGenerator, which seals blocks and pushes them, then waits for Stop.
func (r *numbers) Start(ctx context.Context, rt source.Runtime[int]) error {
	defer close(r.done)
	g := source.NewBlockGenerator(rt, nil)
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()

	recs := make([]int, r.n)
	for i := range recs {
		recs[i] = i + 1
	}
	read := batch.SeqRange{Stream: "numbers", Shard: "0", First: "1", Last: strconv.Itoa(r.n), Count: r.n}
	if err := g.Add(ctx, recs, read); err != nil {
		<-ran
		return err
	}
	select {
	case <-r.stop:
		return g.Stop(ctx) // seals and pushes what it holds; Run returns nil
	case err := <-ran:
		return err // ctx done, or a push failed
	}
}

// Stop asks Start to push what it holds and return, and waits for it.
func (r *numbers) Stop(ctx context.Context) error {
	r.once.Do(func() { close(r.stop) })
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Recompute makes a lost block's records again from its ranges.
func (r *numbers) Recompute(_ context.Context, info batch.BlockInfo) ([]int, error) {
	var out []int
	for _, rg := range info.Ranges {
		first, err := strconv.Atoi(rg.First)
		if err != nil {
			return nil, err
		}
		last, err := strconv.Atoi(rg.Last)
		if err != nil {
			return nil, err
		}
		for i := first; i <= last; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

// A source of one's own: a Receiver that reads records, adds them to a
// BlockGenerator with the ranges they came from, and can read a range
// again (Recompute). stream.From turns it into a stream.
func Example() {
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	stream.ForEachBatch(stream.From[int](p, newNumbers(5)), func(_ context.Context, b *batch.Batch[int]) error {
		if b.Len() > 0 {
			fmt.Println(b.Records(), b.Ranges())
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run drains at once: the receiver is stopped, what it pushed is processed
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// [1 2 3 4 5] [numbers/0[1..5]#5]
}
