package memory_test

import (
	"context"
	"fmt"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/memory"
)

// A Source delivers pushed records in blocks that remember their ranges, and
// can rebuild a block's records from those ranges. Here a small push
// function stands in for the driver.
func Example() {
	src, err := memory.New[string](memory.Config{Shards: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	src.Push("a", "b") // shard 0, sequence numbers 1 and 2
	src.Push("c")      // shard 1, sequence number 1
	src.Push("d", "e") // shard 0, sequence numbers 3 and 4

	var ranges []batch.SeqRange
	push := func(_ context.Context, b source.Block[string]) (batch.BlockInfo, error) {
		// A block holds each of its ranges' records, range after range.
		recs := b.Records
		for _, r := range b.Ranges {
			fmt.Println(r, recs[:r.Count])
			recs = recs[r.Count:]
		}
		ranges = append(ranges, b.Ranges...)
		return batch.BlockInfo{Ranges: b.Ranges, Count: len(b.Records)}, nil
	}

	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- src.Start(ctx, source.Runtime[string]{Push: push}) }()
	if err := src.Stop(ctx); err != nil { // pushes everything queued, then Start returns
		fmt.Println(err)
	}
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	fmt.Println("latest stored:", src.LatestStored("shardId-000000000000"), src.LatestStored("shardId-000000000001"))

	recs, err := src.Recompute(ctx, batch.BlockInfo{Ranges: ranges})
	fmt.Println("recomputed:", recs, err)
	// Output:
	// memory/shardId-000000000000[1..2]#2 [a b]
	// memory/shardId-000000000001[1..1]#1 [c]
	// memory/shardId-000000000000[3..4]#2 [d e]
	// latest stored: 4 1
	// recomputed: [a b c d e] <nil>
}
