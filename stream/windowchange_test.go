package stream_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// TestRestartWithAnotherInverseWindowLength drains a pipeline whose
// ReduceByKeyAndWindow (with an inverse) has one window length, and
// restarts it on the same recovery log with another (3s -> 5s, 5s -> 3s),
// one record a second. The window the snapshot kept has the old length:
// slid from as if it had the new one, batches that never entered it were
// taken out with the inverse (longer), or batches that entered it never
// were (shorter), wrong by a constant for good. Every window the restarted
// Run outputs must count the records of the batches in (t-length, t], as
// it does without an inverse: the history holds them.
func TestRestartWithAnotherInverseWindowLength(t *testing.T) {
	for _, c := range []struct{ from, to time.Duration }{{3 * time.Second, 5 * time.Second}, {5 * time.Second, 3 * time.Second}} {
		t.Run(c.from.String()+"->"+c.to.String(), func(t *testing.T) { testWindowLengthChange(t, c.from, c.to) })
	}
}

func testWindowLengthChange(t *testing.T, from, to time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
		var mu sync.Mutex
		records := map[batch.Time]int{} // records per batch time, both Runs
		windows := map[batch.Time]int{} // the restarted Run's window values

		run := func(length time.Duration, second bool, n int) {
			p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: d.log,
				StateSnapshotInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			src := newReplay(t, d)
			s := stream.From(p, src)
			stream.ForEachBatch(s, func(_ context.Context, b *batch.Batch[string]) error {
				mu.Lock()
				defer mu.Unlock()
				records[b.Time()] = b.Len()
				return nil
			}, stream.Named("records"))
			pairs := stream.Map(s, func(string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: "k", Value: 1} })
			sum := func(a, b int) int { return a + b }
			sub := func(a, b int) int { return a - b }
			stream.ForEachBatch(stream.ReduceByKeyAndWindow(pairs, sum, sub, length, time.Second),
				func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
					if !second {
						return nil
					}
					mu.Lock()
					defer mu.Unlock()
					windows[b.Time()] = 0
					for kv := range b.All() {
						windows[b.Time()] = kv.Value
					}
					return nil
				}, stream.Named("window"))
			errc := make(chan error, 1)
			go func() { errc <- p.Run(t.Context()) }()
			time.Sleep(300 * time.Millisecond)
			for range n {
				src.produce(d.record()) // one record a second
				time.Sleep(time.Second)
			}
			if err := p.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
		run(from, false, 8)
		run(to, true, 8)

		mu.Lock()
		defer mu.Unlock()
		bad := 0
		for _, wt := range slices.Sorted(maps.Keys(windows)) {
			truth := 0
			for bt, n := range records {
				if bt > wt.Add(-to) && bt <= wt {
					truth += n
				}
			}
			if windows[wt] != truth {
				bad++
				t.Errorf("window at %v after the restart: %d records, truth (batches in (t-%v, t]) %d", wt, windows[wt], to, truth)
			}
		}
		if len(windows) == 0 {
			t.Fatal("no window output by the restarted Run")
		}
	})
}
