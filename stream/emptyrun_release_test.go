package stream_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
)

// TestEmptyRunRerunRecorded crashes an idle pipeline whose UpdateStateByKey
// keeps its keys, in the output of an empty batch of a run, restarts it and
// stops it while it runs again the run's batches the crash left pending,
// then restarts it once more: the batches the second Run completed are not
// run a third time (their completion, which no entry of theirs records, is
// recorded when the Run stops), and those it did not are.
func TestEmptyRunRerunRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 200 * time.Millisecond
		d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
		runs := map[batch.Time]int{}
		var stopAt func(n int) bool // called with the number of batches the current Run output
		dl := &allDelays{}
		build := func() (*stream.Pipeline, *replay) {
			p, src, pairs := keyedOn(t, d, iv, dl)
			st := stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + 1 + len(vs), true })
			n := 0
			stream.ForEachBatch(st, func(ctx context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
				runs[b.Time()]++
				if n++; stopAt != nil && stopAt(n) {
					p.Stop()
					return ctx.Err()
				}
				return nil
			})
			return p, src
		}
		run := func(p *stream.Pipeline) error {
			errc := make(chan error, 1)
			go func() { errc <- p.Run(t.Context()) }()
			select {
			case err := <-errc:
				return err
			case <-time.After(time.Minute):
				t.Fatal("the Run was not stopped in a minute")
				return nil
			}
		}

		// First Run: records, then idle until the 20th empty batch, in
		// whose output the process dies.
		p1, src := build()
		stopAt = func(n int) bool {
			if n == 23 {
				d.log.Freeze(errCrash)
				return true
			}
			return false
		}
		go func() {
			time.Sleep(iv / 2)
			src.produce(d.record(), d.record(), d.record())
		}()
		if err := run(p1); err != nil && !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
		d.log.Freeze(nil)
		st, err := recoverylog.Recover(d.log.Entries())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Pending) < 10 {
			t.Fatalf("%d batches pending after the crash: the test does not test", len(st.Pending))
		}
		pending := map[batch.Time]bool{}
		for _, p := range st.Pending {
			pending[p.Time] = true
		}
		first := maps.Clone(runs) // what the first Run output

		// Second Run: stopped in the output of the 8th pending batch.
		p2, _ := build()
		stopAt = func(n int) bool { return n == 8 }
		if err := run(p2); err != nil {
			t.Fatal(err)
		}
		// Third Run: until it ran new batches.
		p3, _ := build()
		stopAt = func(n int) bool { return n == len(st.Pending)+5 }
		if err := run(p3); err != nil {
			t.Fatal(err)
		}
		for bt, n := range runs {
			switch {
			case n > 3:
				t.Errorf("the output of batch %v ran %d times", bt, n)
			case n == 3 && bt != st.Pending[7].Time:
				t.Errorf("the output of batch %v ran 3 times; only the one the second Run stopped in may", bt)
			case n > 1 && !pending[bt]:
				t.Errorf("the output of batch %v ran %d times; it was not pending after the crash", bt, n)
			}
		}
		for _, p := range st.Pending {
			if runs[p.Time] == first[p.Time] {
				t.Errorf("batch %v, pending after the crash, did not run again", p.Time)
			}
		}
		// The pending batches after the crash are ahead of the clock of
		// the restarts: they are not early.
		dl.mu.Lock()
		defer dl.mu.Unlock()
		if dl.least < 0 {
			t.Errorf("a scheduling delay of %v, want none negative", dl.least)
		}
	})
}

// TestEmptyRunOldNotRerun runs a stateful pipeline whose keys leave in the
// first empty batch after its records (an UpdateStateByKey that keeps no
// key without values): that batch moves the state and starts a run of
// empty batches, the later ones are quiet and only reserve times. The
// process dies a minute later: the restart must not run the old run's
// batches again, which completed long before (the reservations written
// after them, in order, say so), nor anything but what the crash
// interrupted.
func TestEmptyRunOldNotRerun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 200 * time.Millisecond
		d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
		runs := map[batch.Time]int{}
		var crashAt atomic.Int64 // a batch time
		build := func() (*stream.Pipeline, *replay) {
			p, src, pairs := keyedOn(t, d, iv, nil)
			st := stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), len(vs) > 0 })
			stream.ForEachBatch(st, func(ctx context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
				runs[b.Time()]++
				if at := crashAt.Load(); at != 0 && int64(b.Time()) >= at {
					d.log.Freeze(errCrash)
					p.Stop()
					return ctx.Err()
				}
				return nil
			})
			return p, src
		}
		p1, src := build()
		errc := make(chan error, 1)
		go func() { errc <- p1.Run(t.Context()) }()
		time.Sleep(iv / 2)
		src.produce(d.record(), d.record(), d.record())
		crash := batch.TimeOf(time.Now()).Add(time.Minute)
		crashAt.Store(int64(crash))
		if err := <-errc; err != nil && !errors.Is(err, errCrash) {
			t.Fatal(err)
		}
		d.log.Freeze(nil)
		st, err := recoverylog.Recover(d.log.Entries())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Pending {
			if p.Time < crash {
				t.Errorf("batch %v pending after the crash at %v: it completed long before", p.Time, crash)
			}
		}
		if len(st.Runs) == 0 && st.ReservedThrough == 0 {
			t.Fatal("no run and no reservation: the test does not test")
		}
	})
}

// keyedOn returns a pipeline of batch interval iv on d's log, heard by
// listener l if not nil, its source, and its records as pairs of their
// state key and 1.
func keyedOn(t *testing.T, d *durable, iv time.Duration, l stream.Listener) (*stream.Pipeline, *replay, *stream.Stream[stream.Pair[string, int]]) {
	t.Helper()
	cfg := stream.Config{BatchInterval: iv, Recovery: d.log}
	if l != nil {
		cfg.Listeners = []stream.Listener{l}
	}
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := newReplay(t, d)
	pairs := stream.Map(stream.From(p, src), func(r string) stream.Pair[string, int] {
		return stream.Pair[string, int]{Key: stateKey(r), Value: 1}
	})
	return p, src, pairs
}

// allDelays keeps the least scheduling delay of the batches completed.
type allDelays struct {
	stream.NopListener
	mu    sync.Mutex
	least time.Duration
}

func (d *allDelays) BatchCompleted(info stream.BatchInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.least = min(d.least, info.SchedulingDelay)
}
