package dynamolog_test

import (
	"context"
	"errors"
	"fmt"

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

	first, err := cfg.Open(ctx) // creates the table on first use
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Close()
	// The driver appends its encoded entries; plain bytes here.
	if err := first.Append(ctx, []byte("block 0 stored"), []byte("batch 1000 allocated")); err != nil {
		fmt.Println(err)
		return
	}

	// The worker restarts, elsewhere: it reads what its predecessor logged.
	second, err := cfg.Open(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer second.Close()
	records, err := second.Read(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range records {
		fmt.Println(string(r))
	}
	err = first.Append(ctx, []byte("batch 1000 completed"))
	fmt.Println("old writer fenced:", errors.Is(err, recovery.ErrFenced))
	// Output:
	// block 0 stored
	// batch 1000 allocated
	// old writer fenced: true
}
