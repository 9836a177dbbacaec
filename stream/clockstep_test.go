package stream_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestClockStepForwardWarnsAsSuch steps the wall clock of a running
// pipeline forward by 6 hours: the driver runs every batch time it missed,
// back to back, and the first of them starts 6 hours after its time. It
// warns once that batches are behind, but says why: the batch was cut late
// (the clock stepped forward, or the process was paused), while the batch
// runner waited, not that processing is slower than the batch interval,
// which it is not; then, caught up, it says so at INFO.
func TestClockStepForwardWarnsAsSuch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 10 * time.Second
		clk := &wallClock{}
		var mu sync.Mutex
		var warned, behind, back []string
		logger := slog.New(slog.NewTextHandler(lineWriter(func(line string) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case strings.Contains(line, "level=WARN") && strings.Contains(line, "behind"):
				behind = append(behind, line)
			case strings.Contains(line, "level=WARN"):
				warned = append(warned, line)
			case strings.Contains(line, "back on schedule"):
				back = append(back, line)
			}
		}), nil))
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Clock: clk, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[string](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stream.ForEachBatch(stream.From(p, src), func(context.Context, *batch.Batch[string]) error { return nil })
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(5*iv + iv/2)
		clk.setLag(-6 * time.Hour) // the wall clock steps forward
		time.Sleep(5 * iv)         // the missed batch times run at once
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(behind) != 1 {
			t.Fatalf("a clock stepped forward 6 h logged %d warnings of batches behind, want 1:\n%s", len(behind), strings.Join(behind, ""))
		}
		if w := behind[0]; strings.Contains(w, "processing is slower") || !strings.Contains(w, "clock stepped forward") {
			t.Errorf("the warning of a clock stepped forward blames slow processing, or does not name the clock step:\n%s", w)
		}
		if len(back) != 1 {
			t.Errorf("%d INFO lines said the batches are back on schedule, want 1", len(back))
		}
		if len(warned) > 0 {
			t.Errorf("other warnings:\n%s", strings.Join(warned, ""))
		}
	})
}
