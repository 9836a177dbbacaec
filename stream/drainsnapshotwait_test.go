package stream

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
)

// TestDrainWaitingForFinalSnapshotWarns drains, with no bound, a stateful
// pipeline whose snapshot store ignores its ctx and does not return from
// the final state snapshot the drain stores: the drain cannot finish, and
// the driver warns that it waits for that snapshot after 1, 2 and 4
// minutes, as it does for a receiver or an output that does not return,
// not never; Drain and Run return once the store does.
func TestDrainWaitingForFinalSnapshotWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		logs := &logLines{}
		store := recoverylog.NewMemory()
		p, src := stateCountPipeline(t, Config{Recovery: store, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(iv / 2)
		src.Push("a", "b", "a")
		time.Sleep(5 * iv)
		release := make(chan struct{})
		store.SetSnapshotHook(func(batch.Time, []byte) error { <-release; return nil }) // deaf to ctx
		drained := make(chan error, 1)
		go func() { drained <- p.Drain(context.Background()) }()
		time.Sleep(5 * time.Minute)
		warned := logs.matching("level=WARN", "final state snapshot")
		if len(warned) != 3 {
			t.Errorf("a drain waiting 5 minutes for its final state snapshot logged %d such warnings, want 3 (at 1, 2 and 4 minutes); WARN lines:\n%s",
				len(warned), strings.Join(logs.matching("level=WARN"), ""))
		}
		close(release)
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
