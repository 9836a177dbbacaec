package checkpointer_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/internal/checkpointer"
)

// A receiver registers each shard it reads and supplies its latest safe
// (completed) sequence numbers; the checkpointer commits them on its interval and once
// more on Close.
func ExampleCheckpointer() {
	stored := map[string]string{"shardId-000000000000": "49590338271490256608559692538361571095921575989136588898"}
	cp, err := checkpointer.New(checkpointer.Config{
		Interval: time.Second,
		Latest: func(shard string) (string, bool) {
			seq, ok := stored[shard]
			return seq, ok
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	commit := checkpointer.CommitterFunc(func(_ context.Context, shard, seq string) error {
		fmt.Println("commit", shard, seq)
		return nil
	})
	if err := cp.Register("shardId-000000000000", commit, checkpointer.TrimHorizon); err != nil {
		fmt.Println(err)
		return
	}
	// Run(ctx) would commit every second; Close commits one last time.
	if err := cp.Close(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println("commits:", cp.Stats().Commits)
	// Output:
	// commit shardId-000000000000 49590338271490256608559692538361571095921575989136588898
	// commits: 1
}

func ExampleNew_invalidConfig() {
	_, err := checkpointer.New(checkpointer.Config{})
	fmt.Println(err)
	// Output:
	// checkpoint: invalid config: Interval 0s: must be > 0 (use the batch interval)
	// Latest is nil: set it to the receiver's lookup of the latest safe (completed) sequence number
}
