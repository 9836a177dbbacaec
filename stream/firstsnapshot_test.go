package stream_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestFirstSnapshotAfterAnInterval checks that on a first start the state
// snapshot interval counts from the first completed batch: a stateful
// pipeline whose records come after idle batches takes no snapshot within
// its first interval. Counted from time 0, the first non-empty batch was
// snapshotted at once, and a restart replayed only what came after it.
func TestFirstSnapshotAfterAnInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		store := recoverylog.NewMemory()
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: store, StateSnapshotInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[string](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		pairs := stream.Map(stream.From(p, src), func(w string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: w, Value: 1} })
		counts := stream.UpdateStateByKey(pairs, func(_ string, vs []int, st int, _ bool) (int, bool) { return st + len(vs), true })
		stream.ForEachBatch(counts, func(context.Context, *batch.Batch[stream.Pair[string, int]]) error { return nil })
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(5*iv + iv/2) // idle batches first
		src.Push("a", "b", "a")
		time.Sleep(10 * iv)
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if snaps := store.Snapshots(); len(snaps) != 0 {
			t.Errorf("%d state snapshots within the first hour-long interval, want none", len(snaps))
		}
	})
}
