package stream_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// printLetters is a stream.DeadLetters that prints the records it is given.
type printLetters struct{}

func (printLetters) Quarantine(_ context.Context, letters []stream.DeadLetter) error {
	for _, l := range letters {
		fmt.Printf("quarantined %q: %s\n", l.Record, l.Err)
	}
	return nil
}

// Sales per item, from lines of an item and a quantity. A line whose
// quantity is not a number makes the Map before ReduceByKey panic; with
// Quarantine on ReduceByKey that line is set aside (here printed; in
// production a sink/deadletter directory, table or stream) and the batch
// is reduced without it, instead of stopping the pipeline at every start.
func ExampleReduceByKey_quarantine() {
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
	src.Push("apple 3", "pear lots", "apple 2", "pear 1")
	sales := stream.Map(stream.From(p, src), func(line string) stream.Pair[string, int] {
		item, qty, _ := strings.Cut(line, " ")
		n, err := strconv.Atoi(qty)
		if err != nil {
			panic(err)
		}
		return stream.Pair[string, int]{Key: item, Value: n}
	})
	totals := stream.ReduceByKey(sales, func(a, b int) int { return a + b }, stream.Quarantine(printLetters{}))
	stream.ForEachBatch(totals, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
		for kv := range b.All() {
			fmt.Println(kv)
		}
		return nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run drains what the source holds, then returns
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// quarantined "pear lots": panic: strconv.Atoi: parsing "lots": invalid syntax
	// (apple, 5)
	// (pear, 1)
}

// A Transform sees the whole batch: here it ranks the batch's scores, and
// panics on one it cannot parse. With Quarantine, the batch's records are
// set aside (here printed) and the Transform's batch is empty, instead of
// the pipeline stopping at every start.
func ExampleTransform_quarantine() {
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
	src.Push("7", "x", "3")
	best := stream.Transform(stream.From(p, src), func(_ context.Context, b *batch.Batch[string]) (*batch.Batch[int], error) {
		top := 0
		for s := range b.All() {
			n, err := strconv.Atoi(s)
			if err != nil {
				panic(err)
			}
			top = max(top, n)
		}
		return batch.Derive(b, []int{top}), nil
	}, stream.Quarantine(printLetters{}))
	stream.ForEachBatch(best, func(_ context.Context, b *batch.Batch[int]) error {
		fmt.Println("best:", b.Records())
		return nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run drains what the source holds, then returns
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// quarantined "7": panic: strconv.Atoi: parsing "x": invalid syntax
	// quarantined "x": panic: strconv.Atoi: parsing "x": invalid syntax
	// quarantined "3": panic: strconv.Atoi: parsing "x": invalid syntax
	// best: []
}

// A ForEachBatch function writing to a store of its own names the records
// the store refuses with a RecordErrors: with Quarantine, those alone are
// set aside (here printed), and the function is called again with the
// others, instead of the whole batch going to the dead letters.
func ExampleRecordErrors() {
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
	src.Push("apple", "", "pear", "")
	stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[string]) error {
		refused := &stream.RecordErrors{Errs: map[int]error{}}
		i := 0
		for name := range b.All() {
			if name == "" { // the store takes no empty key
				refused.Errs[i] = fmt.Errorf("record %d: empty name", i)
			}
			i++
		}
		if len(refused.Errs) > 0 {
			return refused // nothing written: called again without them
		}
		for name := range b.All() {
			fmt.Println("stored", name)
		}
		return nil
	}, stream.Quarantine(printLetters{}))

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run drains what the source holds, then returns
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// stored apple
	// stored pear
	// quarantined "": record 1: empty name
	// quarantined "": record 3: empty name
}
