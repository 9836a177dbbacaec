package recoverytest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/recovery/recoverytest"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// A test of a pipeline with a recovery log, without a directory: the log
// outlives each Run, as a directory would, so a second pipeline on it
// recovers what the first logged. Here the second is built with its output
// renamed, and the log refuses it.
func ExampleMemory() {
	log := recoverytest.Memory()
	run := func(output string, records ...string) error {
		p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond, Recovery: log})
		if err != nil {
			return err
		}
		src, err := memory.New[string](memory.Config{})
		if err != nil {
			return err
		}
		src.Push(records...)
		stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[string]) error {
			if b.Len() > 0 { // the timer may cut an empty batch before the source pushes
				fmt.Println(output, b.Records())
			}
			return nil
		}, stream.Named(output))
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Run drains at once: what the source holds is processed, then Run returns
		return p.Run(ctx)
	}

	fmt.Println(run("lines", "a", "b"))
	err := run("words", "c")
	fmt.Println(errors.Is(err, recovery.ErrShapeChanged))
	// Output:
	// lines [a b]
	// <nil>
	// true
}
