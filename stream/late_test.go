package stream

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
)

// TestLateBatchesWarn runs a pipeline whose output takes 1.5 batch
// intervals for 10 minutes, so that each batch starts half an interval
// later than the one before: the driver warns that batches fall behind
// once the delay passes a minute and again when it doubles (not once a
// batch), then, once the output is fast again and the batches have caught
// up, says so once at INFO.
func TestLateBatchesWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		p, _, s := newTest[string](t, Config{BatchInterval: time.Second,
			Logger: logs.logger()})
		var slow atomic.Bool
		slow.Store(true)
		ForEachBatch(s, func(ctx context.Context, _ *batch.Batch[string]) error {
			if slow.Load() {
				return clock.Sleep(ctx, clock.Real{}, 1500*time.Millisecond)
			}
			return nil
		})
		errc := start(t, p)
		time.Sleep(10 * time.Minute) // delays grow to about 200 s
		slow.Store(false)
		time.Sleep(10 * time.Minute) // the late batches run at once, and the later ones are on time
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if got := logs.matching("level=WARN", "behind schedule"); len(got) != 2 {
			t.Errorf("batches falling up to 200 s behind logged %d warnings, want 2 (past 60 s, past 120 s); WARN lines:\n%s",
				len(got), strings.Join(logs.matching("level=WARN"), ""))
		}
		if got := logs.matching("level=WARN", "behind schedule", "processing is slower"); len(got) != 2 {
			t.Errorf("%d warnings of batches behind say processing is slower, want both (the batch runner was busy throughout)", len(got))
		}
		if got := logs.matching("level=INFO", "back on schedule"); len(got) != 1 {
			t.Errorf("%d INFO lines said the batches are back on schedule, want 1", len(got))
		}
	})
}
