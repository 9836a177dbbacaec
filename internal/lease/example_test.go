package lease_test

import (
	"context"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/lease"
)

// The Kinesis receiver wires a Coordinator and a Checkpointer (its leases.go)
// when its Config.Leases is set. A worker runs one of each: the
// Coordinator is the Checkpointer's Committer, Latest returns the sequence
// numbers safe to checkpoint (records of completed batches only: guarantee
// G4), and a reader delivers only while Holds(shard) is true.
func ExampleCoordinator() {
	ctx := context.Background()
	var (
		ddb             leasetable.DynamoDBAPI                   // usually a *dynamodb.Client
		latestCompleted func(shard string) (seq string, ok bool) // the receiver's completed positions
	)
	cp, err := checkpointer.New(checkpointer.Config{Interval: time.Second, Latest: latestCompleted})
	if err != nil {
		return
	}
	var coord *lease.Coordinator
	coord, err = lease.NewCoordinator(lease.CoordinatorConfig{
		Config: leasetable.Config{TableName: "wordcount", DynamoDB: ddb},
		OnAcquired: func(l lease.Lease) {
			// Start reading l.Shard after l.Checkpoint (a sequence number;
			// at it when !l.WrittenByWeir(): a KCL application wrote it),
			// or at the initial position it names. Then:
			_ = cp.Register(l.Shard, coord, l.Checkpoint)
		},
		OnLost: func(shard string) {
			// Stop reading shard at once, then drop it without a final
			// checkpoint:
			_ = cp.Remove(ctx, shard, nil)
		},
	})
	if err != nil {
		return
	}
	go func() { _ = coord.Run(ctx) }()
	go func() { _ = cp.Run(ctx) }()

	// A shard read to its end, all its blocks completed:
	_ = cp.MarkShardEnd(ctx, "shardId-000000000000", coord)

	// Clean shutdown: stop the readers, then
	_ = cp.Close(ctx)    // the last checkpoint of every shard
	_ = coord.Drain(ctx) // hand the leases back at once
}
