package stream_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// TestDrainedRunRestartsWithoutReplay drains a stateful pipeline, with
// records and then idle batches, well within its state snapshot interval,
// and restarts it: the drain ends with a snapshot of the state after its
// last batch, so the restart replays no batch (it replayed every batch
// since the last snapshot, the empty ones included, re-reading the ranges
// of the others) and its state goes on from the drained Run's. A Run that
// crashes instead still replays them (the crash case).
func TestDrainedRunRestartsWithoutReplay(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "drained"
		if crash {
			name = "crashed"
		}
		t.Run(name, func(t *testing.T) { testRestartReplay(t, crash) })
	}
}

func testRestartReplay(t *testing.T, crash bool) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		d := &durable{log: recoverylog.NewMemory()}
		run := func(ctx context.Context, produce func(*replay), stop func(p *stream.Pipeline, cancel func())) (replayed, recomputed int, counts map[string]int) {
			t.Helper()
			replayed = -1
			logger := slog.New(slog.NewTextHandler(lineWriter(func(line string) {
				if !strings.Contains(line, "replaying the batches completed after it") {
					return
				}
				m := regexp.MustCompile(` replay=(\d+)`).FindStringSubmatch(line)
				if m == nil {
					t.Errorf("no replay count in %q", line)
					return
				}
				replayed, _ = strconv.Atoi(m[1])
			}), nil))
			p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: d.log,
				StateSnapshotInterval: time.Hour, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			src := newReplay(t, d)
			var recomputes atomic.Int64
			src.onRecompute = func() { recomputes.Add(1) }
			pairs := stream.Map(stream.From(p, src), func(w string) stream.Pair[string, int] {
				return stream.Pair[string, int]{Key: w, Value: 1}
			})
			state := stream.UpdateStateByKey(pairs, func(_ string, vs []int, st int, _ bool) (int, bool) { return st + len(vs), true })
			counts = make(map[string]int)
			stream.ForEachBatch(state, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
				for kv := range b.All() {
					counts[kv.Key] = kv.Value
				}
				return nil
			})
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- p.Run(ctx) }()
			time.Sleep(iv / 2)
			produce(src)
			time.Sleep(30 * iv) // idle batches after the records
			stop(p, cancel)
			if err := <-errc; err != nil && !crash {
				t.Fatal(err)
			}
			return replayed, int(recomputes.Load()), counts
		}
		first := func(src *replay) {
			src.produce("a", "b", "a")
			time.Sleep(2 * iv)
			src.produce("a")
		}
		stop := func(_ *stream.Pipeline, cancel func()) { cancel() } // drains
		if crash {
			stop = func(p *stream.Pipeline, _ func()) {
				d.log.Freeze(errors.New("the process died"))
				p.Stop()
			}
		}
		if _, _, counts := run(t.Context(), first, stop); counts["a"] != 3 {
			t.Fatalf("first Run: count of a %d, want 3", counts["a"])
		}
		d.log.Freeze(nil)
		replayed, recomputed, counts := run(t.Context(), func(src *replay) { src.produce("a") },
			func(_ *stream.Pipeline, cancel func()) { cancel() })
		if counts["a"] != 4 {
			t.Errorf("after the restart: count of a %d, want 4 (the state goes on from the first Run's)", counts["a"])
		}
		if crash {
			if replayed == 0 || recomputed == 0 {
				t.Errorf("a restart after a crash replayed %d batches (re-reading blocks: %v), want every batch since the snapshot: the test does not test",
					replayed, recomputed != 0)
			}
			return
		}
		if replayed != 0 || recomputed != 0 {
			t.Errorf("a restart after a drain replayed %d batches (re-reading blocks: %v), want none: the drain snapshots the state after its last batch",
				replayed, recomputed != 0)
		}
	})
}
