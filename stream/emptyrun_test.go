package stream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// TestEmptyRunRerunThenStop crashes an idle pipeline whose
// UpdateStateByKey keeps its keys in an empty batch of a run of empty
// batches, restarts it and stops it gracefully (drained, or its context
// done) as soon as it has run the run's pending batches again, before it
// cuts a batch of its own, then restarts it once more: the second restart
// must not run those batches a third time, since the Run before it
// completed them and stopped gracefully (G3). The same holds when the
// restarts run the pipeline without its stateful operator (the log's shape
// names sources and outputs only).
func TestEmptyRunRerunThenStop(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		for _, drain := range []bool{true, false} {
			name := "context done"
			if drain {
				name = "drained"
			}
			if stateless {
				name += ", stateful operator removed"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { testEmptyRunRerunThenStop(t, drain, stateless) })
			})
		}
	}
}

func testEmptyRunRerunThenStop(t *testing.T, drain, stateless bool) {
	const iv = 200 * time.Millisecond
	d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
	var (
		mu    sync.Mutex
		runs  = map[batch.Time]int{} // how often the output ran at a batch time
		empty int                    // empty batches the first Run's output saw
	)
	build := func(crash func()) (*stream.Pipeline, *replay) {
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: d.log, CompactEvery: 20,
			StateSnapshotInterval: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		src := newReplay(t, d)
		if stateless && crash == nil {
			stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[string]) error {
				mu.Lock()
				defer mu.Unlock()
				runs[b.Time()]++
				return nil
			})
			return p, src
		}
		pairs := stream.Map(stream.From(p, src), func(r string) stream.Pair[string, int] {
			return stream.Pair[string, int]{Key: stateKey(r), Value: 1}
		})
		st := stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) {
			return n + len(vs) + 1, true
		})
		stream.ForEachBatch(st, func(ctx context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
			mu.Lock()
			runs[b.Time()]++
			n := 0
			if crash != nil && b.Len() > 0 {
				empty++ // the keys' states: the batch holds no record, but shows them
				n = empty
			}
			mu.Unlock()
			if n == 30 {
				crash()
				return ctx.Err()
			}
			return nil
		})
		return p, src
	}

	var p1 *stream.Pipeline
	p1, src1 := build(func() {
		d.log.Freeze(errCrash) // the process dies: nothing more is written
		p1.Stop()
	})
	errc := make(chan error, 1)
	go func() { errc <- p1.Run(t.Context()) }()
	time.Sleep(iv / 2)
	src1.produce(d.record(), d.record(), d.record())
	if err := <-errc; err != nil && !errors.Is(err, errCrash) {
		t.Fatalf("first Run: %v", err)
	}
	d.log.Freeze(nil)
	st, err := recoverylog.Recover(d.log.Entries())
	if err != nil {
		t.Fatal(err)
	}
	var rerun []batch.Time
	for _, p := range st.Pending {
		if p.InRun {
			rerun = append(rerun, p.Time)
		}
	}
	if len(rerun) == 0 {
		t.Fatalf("no batch of a run pending after the crash: the test does not test; pending %v", st.Pending)
	}

	// Restart: the run's pending batches run again before any batch is
	// cut; stop, then restart and stop again.
	for i := range 2 {
		p, _ := build(nil)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { errc <- p.Run(ctx) }()
		time.Sleep(time.Millisecond)
		if drain {
			if err := p.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
		} else {
			cancel()
		}
		if err := <-errc; err != nil {
			t.Fatalf("Run %d after the crash: %v", i+1, err)
		}
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, bt := range rerun {
		if runs[bt] > 2 {
			t.Errorf("the output of batch %v ran %d times: run again after a graceful stop", bt, runs[bt])
		}
	}
}
