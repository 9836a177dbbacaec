package deadletter_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/weirstream/weir/sink/deadletter"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// A function that panics on one record quarantines that record alone: the
// others are output, and the pipeline goes on.
func Example() {
	dir, err := os.MkdirTemp("", "deadletter-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	dead, err := deadletter.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dead.Close()

	p, err := stream.NewPipeline(stream.Config{BatchInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	src.Push("1", "2", "x", "4")
	numbers := stream.Map(stream.From(p, src), func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			panic(err)
		}
		return n
	})
	sum := 0 // one shard: ForEach runs one record at a time
	stream.ForEach(numbers, func(_ context.Context, n int) error { sum += n; return nil },
		stream.Retry(0), stream.Quarantine(dead))

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run drains at once: what was pushed is processed
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	letters, err := dead.Letters()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range letters {
		// The record's range of sequence numbers, and its offset there.
		fmt.Printf("%s %s-%s +%d: %q: %s\n", l.Range.Shard, l.Range.First, l.Range.Last, l.Offset, l.Record, l.Err)
	}
	fmt.Println("sum:", sum)
	// Output:
	// shardId-000000000000 1-4 +2: "x": panic: strconv.Atoi: parsing "x": invalid syntax
	// sum: 7
}
