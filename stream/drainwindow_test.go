package stream_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// TestDrainLeavesWindowOpen pins what Drain documents of a window whose
// time is after the drained Run's last batch: the Run does not output it;
// with Config.Recovery its batches are in the drain's snapshot, so a
// restart that runs the window's time outputs it whole, with the records
// of both Runs, while a restart after that time does not output it (no
// batch runs at a time that passed while the pipeline was down) and its
// records are in the later windows that still cover their batches only.
func TestDrainLeavesWindowOpen(t *testing.T) {
	for _, late := range []bool{false, true} {
		name := map[bool]string{false: "restart before the window's time", true: "restart after it"}[late]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const iv, length, slide = time.Second, 20 * time.Second, 10 * time.Second
				d := &durable{log: recoverylog.NewMemory()}
				windows := map[batch.Time][]string{}
				var open []string // the drains' lines about a window left open
				run := func(produce func(*replay), then time.Duration) {
					t.Helper()
					logger := slog.New(slog.NewTextHandler(lineWriter(func(line string) {
						if strings.Contains(line, "window open") {
							open = append(open, line)
						}
					}), nil))
					p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: d.log, Logger: logger})
					if err != nil {
						t.Fatal(err)
					}
					src := newReplay(t, d)
					w := stream.Window(stream.From(p, src), length, slide)
					stream.ForEachBatch(w, func(_ context.Context, b *batch.Batch[string]) error {
						recs := slices.Sorted(b.All())
						windows[b.Time()] = recs
						return nil
					})
					ctx, cancel := context.WithCancel(t.Context())
					errc := make(chan error, 1)
					go func() { errc <- p.Run(ctx) }()
					time.Sleep(iv / 2)
					produce(src)
					time.Sleep(then)
					cancel() // drains
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
				}
				// synctest's clock starts at a multiple of 10 s: the
				// first Run's batches are at 1 s to 3 s, its window at
				// 10 s is open when it drains.
				start := batch.TimeOf(time.Now())
				run(func(src *replay) { src.produce("a") }, 3*iv)
				if len(windows) != 0 {
					t.Fatalf("the drained Run output windows %v, want none: its window's time is after its last batch", windows)
				}
				if len(open) != 1 || !strings.Contains(open[0], "level=INFO") || !strings.Contains(open[0], "next=\"946684810000 ms") ||
					!strings.Contains(open[0], "batches=1") {
					t.Errorf("the drain logged %q, want one INFO line naming the window's time and its 1 batch with records", open)
				}
				open = nil
				if late {
					time.Sleep(length) // down past the window's time
				}
				run(func(src *replay) { src.produce("b") }, 15*iv)
				at10 := start.Add(slide)
				got, ok := windows[at10]
				switch {
				case !late && (!ok || !slices.Equal(got, []string{"a", "b"})):
					t.Errorf("window at %v = %v (output %v), want [a b]: the restart outputs it whole", at10, got, ok)
				case late && ok:
					t.Errorf("window at %v output by a restart after its time: %v", at10, got)
				}
				if len(open) != 0 {
					t.Errorf("the second drain, whose windows were all output, logged %q", open)
				}
				for at, recs := range windows {
					if slices.Contains(recs, "a") && at.Sub(start) > length {
						t.Errorf("window at %v holds a, of a batch older than its length", at)
					}
				}
			})
		})
	}
}

// TestDrainWithoutLogWarnsOfOpenWindow drains a pipeline without a
// recovery log while its window holds a batch with records: no restart
// can output it, which the drain warns about.
func TestDrainWithoutLogWarnsOfOpenWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		var warned []string
		logger := slog.New(slog.NewTextHandler(lineWriter(func(line string) {
			if strings.Contains(line, "level=WARN") {
				warned = append(warned, line)
			}
		}), nil))
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		src := newReplay(t, &durable{})
		stream.ForEachBatch(stream.Window(stream.From(p, src), 10*time.Second, 10*time.Second),
			func(context.Context, *batch.Batch[string]) error { return nil })
		errc := make(chan error, 1)
		go func() { errc <- p.Run(context.Background()) }()
		time.Sleep(iv / 2)
		src.produce("a")
		time.Sleep(2 * iv)
		if err := p.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if len(warned) != 1 || !strings.Contains(warned[0], "window open") || !strings.Contains(warned[0], "Config.Recovery") {
			t.Errorf("warnings %q, want one of the window left open, naming Config.Recovery", warned)
		}
	})
}
