package stream

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source"
)

// infoRecorder keeps the BatchInfo of every BatchStarted event.
type infoRecorder struct {
	NopListener
	mu      sync.Mutex
	started []BatchInfo
}

func (r *infoRecorder) BatchStarted(b BatchInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, b)
}

// TestListenerRangesAndUnbatched checks, in virtual time, that a batch's
// events carry its blocks' ranges, and the blocks left unbatched: the batch
// of 200ms runs from 200ms to 500ms, so the batch of 400ms starts at 500ms
// with the block pushed at 450ms waiting for the next batch.
func TestListenerRangesAndUnbatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &infoRecorder{}
		sc, r, s := newTest[string](t, Config{BatchInterval: 200 * time.Millisecond, Listeners: []Listener{rec}})
		ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
			if slices.Contains(b.Records(), "slow") {
				return clock.Sleep(ctx, clock.Real{}, 300*time.Millisecond)
			}
			return nil
		})
		errc := start(t, sc)
		rng := func(first, last string) batch.SeqRange {
			return batch.SeqRange{Stream: "s", Shard: "shard-0", First: first, Last: last, Count: 1}
		}
		push := func(rec string, r0 batch.SeqRange) {
			t.Helper()
			r.mu.Lock()
			rt := r.rt
			r.mu.Unlock()
			if _, err := rt.Push(t.Context(), source.Block[string]{Records: []string{rec}, Ranges: []batch.SeqRange{r0}}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		push("slow", rng("1", "1")) // batch 200ms
		time.Sleep(200 * time.Millisecond)
		push("b", rng("2", "2")) // 300ms: batch 400ms
		time.Sleep(150 * time.Millisecond)
		push("c", rng("3", "3")) // 450ms: batch 600ms
		time.Sleep(100 * time.Millisecond)
		sc.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}
		type ev struct {
			Ranges    []batch.SeqRange
			Unbatched int
		}
		var got []ev
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, b := range rec.started {
			if b.Blocks > 0 {
				got = append(got, ev{b.Ranges, b.Unbatched})
			}
		}
		want := []ev{
			{[]batch.SeqRange{rng("1", "1")}, 0},
			{[]batch.SeqRange{rng("2", "2")}, 1},
			{[]batch.SeqRange{rng("3", "3")}, 0},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("BatchStarted ranges and unbatched blocks (-want +got):\n%s", diff)
		}
	})
}
