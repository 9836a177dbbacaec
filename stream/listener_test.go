package stream

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
)

// TestListenerTimes checks, in virtual time, the times a Listener is told:
// a batch whose output takes 300ms completes with ProcessingTime 300ms, and
// the batch cut while it runs starts late by what it waited for it.
func TestListenerTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		p, r, s := newTest[string](t, Config{BatchInterval: 200 * time.Millisecond, Listeners: []Listener{rec}})
		ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
			if slices.Contains(b.Records(), "slow") {
				return clock.Sleep(ctx, clock.Real{}, 300*time.Millisecond)
			}
			return nil
		})
		// "slow" is in the batch of 200ms, which runs from 200ms to 500ms;
		// "fast" is in the batch of 400ms, which waits for it.
		if err := feed(t, p, r, [][]string{{"slow"}, {"fast"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []string{
			"started 200ms: blocks=1 records=1 delay=0s took=0s err=<nil>",
			"completed 200ms: blocks=1 records=1 delay=0s took=300ms err=<nil>",
			"started 400ms: blocks=1 records=1 delay=100ms took=0s err=<nil>",
			"completed 400ms: blocks=1 records=1 delay=100ms took=0s err=<nil>",
		}
		var got []string
		for _, e := range rec.get() {
			if strings.HasPrefix(e, "started") || strings.HasPrefix(e, "completed") {
				got = append(got, e)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("started and completed events (-want +got):\n%s", diff)
		}
	})
}
