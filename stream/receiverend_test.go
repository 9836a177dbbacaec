package stream

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// earlyReceiver is a receiver whose Start returns nil at once, without
// being asked to stop.
type earlyReceiver struct{}

func (earlyReceiver) Start(context.Context, source.Runtime[string]) error { return nil }
func (earlyReceiver) Stop(context.Context) error                          { return nil }
func (earlyReceiver) Recompute(context.Context, batch.BlockInfo) ([]string, error) {
	return nil, errNoBlock
}

// TestReceiverEndingEarlyWarns runs a pipeline whose receiver's Start
// returns nil without being asked to stop: its source delivers nothing
// more, which the driver warns about once, not once a batch; a drain's
// stop of a receiver is not warned about.
func TestReceiverEndingEarlyWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		p, err := NewPipeline(Config{BatchInterval: time.Second, Logger: logs.logger()})
		if err != nil {
			t.Fatal(err)
		}
		discard := func(context.Context, *batch.Batch[string]) error { return nil }
		ForEachBatch(From[string](p, earlyReceiver{}), discard)
		ForEachBatch(From(p, newTestReceiver[string]()), discard)
		errc := start(t, p)
		time.Sleep(10 * time.Second)
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		warned := logs.matching("level=WARN", "Start returned")
		if len(warned) != 1 || !strings.Contains(warned[0], "source=0") {
			t.Errorf("want one warning of source 0's receiver ending early; WARN lines:\n%s",
				strings.Join(logs.matching("level=WARN"), ""))
		}
	})
}

// panickingReceiver pushes a block, then panics in Start, as a source
// whose decoder meets a poison record may, or, with inStop, in Stop.
type panickingReceiver struct {
	inStop bool
	stopc  chan struct{}
}

func (r *panickingReceiver) Start(ctx context.Context, rt source.Runtime[string]) error {
	if _, err := rt.Push(ctx, source.Block[string]{Records: []string{"a"}}); err != nil {
		return err
	}
	if !r.inStop {
		panic("decoder bug")
	}
	select {
	case <-r.stopc:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *panickingReceiver) Stop(context.Context) error {
	close(r.stopc)
	if r.inStop {
		panic("stop bug")
	}
	return nil
}

func (r *panickingReceiver) Recompute(context.Context, batch.BlockInfo) ([]string, error) {
	return nil, errNoBlock
}

// TestReceiverPanicFailsRun checks that a receiver that panics in Start
// (a source's decoder on a poison record) fails Run with an error naming
// the source, the panic and its stack, and that one that panics in Stop
// is reported as a failed stop, as a Stop's error is: both crashed the
// process, the receivers' Start and Stop running in goroutines of the
// driver that recovered nothing.
func TestReceiverPanicFailsRun(t *testing.T) {
	t.Run("Start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, err := NewPipeline(Config{BatchInterval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ForEachBatch(From[string](p, &panickingReceiver{stopc: make(chan struct{})}), func(context.Context, *batch.Batch[string]) error { return nil })
			err = <-start(t, p)
			for _, want := range []string{"source 0", "Start panicked: decoder bug", "panickingReceiver).Start"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Run = %v, want an error containing %q", err, want)
				}
			}
		})
	})
	t.Run("Stop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			logs := &logLines{}
			p, err := NewPipeline(Config{BatchInterval: time.Second, Logger: logs.logger()})
			if err != nil {
				t.Fatal(err)
			}
			ForEachBatch(From[string](p, &panickingReceiver{inStop: true, stopc: make(chan struct{})}), func(context.Context, *batch.Batch[string]) error { return nil })
			errc := start(t, p)
			time.Sleep(3 * time.Second)
			if err := p.Drain(t.Context()); err != nil {
				t.Errorf("Drain = %v", err)
			}
			if err := <-errc; err != nil {
				t.Errorf("Run = %v, want nil: a failed stop is warned about", err)
			}
			if warned := logs.matching("level=WARN", "receiver stop failed", "Stop panicked: stop bug"); len(warned) != 1 {
				t.Errorf("want one warning of the stop's panic; WARN lines:\n%s", strings.Join(logs.matching("level=WARN"), ""))
			}
		})
	})
}

// hookPanicReceiver pushes a block, then waits to be stopped; its
// BlocksCompleted hook panics, or, with observer, its BatchCompleted.
type hookPanicReceiver struct {
	panickingReceiver
	observer bool
}

func (r *hookPanicReceiver) Start(ctx context.Context, rt source.Runtime[string]) error {
	r.inStop = true // not in Start: wait for Stop
	defer func() { r.inStop = false }()
	return r.panickingReceiver.Start(ctx, rt)
}

func (r *hookPanicReceiver) Stop(context.Context) error {
	select {
	case <-r.stopc:
	default:
		close(r.stopc)
	}
	return nil
}

func (r *hookPanicReceiver) BlocksCompleted(context.Context, []batch.BlockInfo) {
	if !r.observer {
		panic("completion bug")
	}
}

func (r *hookPanicReceiver) BatchCompleted(context.Context, source.BatchReport) {
	if r.observer {
		panic("observer bug")
	}
}

// TestReceiverHookPanicFailsRun checks that a receiver's completion or
// batch hook that panics fails Run with an error naming the hook, the
// panic and its stack: the batch goroutine calls them, and the panic
// crashed the process.
func TestReceiverHookPanicFailsRun(t *testing.T) {
	for _, tc := range []struct {
		observer bool
		want     []string
	}{
		{false, []string{"source 0", "BlocksCompleted panicked: completion bug", "hookPanicReceiver).BlocksCompleted"}},
		{true, []string{"source 0", "BatchCompleted panicked: observer bug", "hookPanicReceiver).BatchCompleted"}},
	} {
		t.Run(tc.want[1], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := NewPipeline(Config{BatchInterval: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				r := &hookPanicReceiver{panickingReceiver: panickingReceiver{stopc: make(chan struct{})}, observer: tc.observer}
				ForEachBatch(From[string](p, r), func(context.Context, *batch.Batch[string]) error { return nil })
				err = <-start(t, p)
				for _, want := range tc.want {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("Run = %v, want an error containing %q", err, want)
					}
				}
			})
		})
	}
}
