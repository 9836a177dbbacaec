package stream_test

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// Named names the components of a pipeline's shape, which a recovery log
// records and checks on every restart.
func ExampleNamed() {
	p, err := stream.NewPipeline(stream.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	lines := stream.From(p, src, stream.Named("lines"))
	stream.ForEachBatch(lines, func(context.Context, *batch.Batch[string]) error { return nil }, stream.Named("files"))
	stream.Print(lines, 10)
	fmt.Println(p.Shape())
	// Output: sources [memory("lines")] outputs [ForEachBatch("files") Print]
}
