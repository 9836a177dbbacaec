package dynamolog_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/localaws"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/recovery/dynamolog"
)

// A pipeline keeps its recovery log in DynamoDB by setting
// stream.Config.Recovery to a Config (here a local dynalite stands in for
// DynamoDB). The driver appends to the log; this example appends by hand
// to show what a worker restarted elsewhere with the same Name reads back,
// and that the writer it replaced is fenced off.
func Example() {
	ctx := context.Background()
	env, err := localaws.Start(ctx, localaws.Options{DynamoDB: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	cfg := dynamolog.Config{
		Client: env.DynamoDB(), // on AWS: leave Client nil, or set AWS and Endpoint
		Table:  "weir-recovery",
		Name:   "wordcount/worker-1",
	}
	// p, err := stream.NewPipeline(stream.Config{Recovery: cfg, ...})

	first, err := dynamolog.Open(ctx, cfg) // creates the table on first use
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Close()
	block := batch.BlockInfo{ID: batch.BlockID{Source: 0, Seq: 0}, Count: 2, Ranges: []batch.SeqRange{
		{Stream: "words", Shard: "shardId-000000000000", First: "100", Last: "200", Count: 2},
	}}
	if err := first.Append(ctx, recovery.BlockStored(block), recovery.BatchAllocated(1000, block.ID)); err != nil {
		fmt.Println(err)
		return
	}

	// The worker restarts, elsewhere: it reads what its predecessor logged.
	second, err := dynamolog.Open(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Close()
	entries, err := second.Read(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range entries {
		fmt.Println(e)
	}
	err = first.Append(ctx, recovery.BatchCompleted(1000))
	fmt.Println("old writer fenced:", errors.Is(err, recovery.ErrFenced))
	// Output:
	// block block-0-0 (1 ranges, 2 records)
	// alloc 1000 ms (1970-01-01T00:00:01Z) [block-0-0]
	// old writer fenced: true
}
