package stream

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

// The tests of this file run in a synctest bubble: the batch timer and
// every deadline fire in virtual time, once every goroutine is blocked, so
// nothing here sleeps or depends on how fast the machine is.

// records returns every record c's output saw, in order.
func records[T any](c *collector[T]) []T {
	var all []T
	for _, o := range c.outs() {
		all = append(all, o.Records...)
	}
	return all
}

// stopCalled reports whether r's Stop was called.
func stopCalled[T any](r *testReceiver[T]) bool {
	select {
	case <-r.stopc:
		return true
	default:
		return false
	}
}

// awaitDone fails t unless p.Done is closed; it is called after Run
// returned, so it must be.
func awaitDone(t *testing.T, p *Pipeline) {
	t.Helper()
	select {
	case <-p.Done():
	default:
		t.Error("Done not closed after Run returned")
	}
}

// TestRunCancelDrains checks the shape of every program: Run(ctx) with ctx
// cancelled, as on Ctrl-C, drains. The receiver is stopped gracefully (it
// pushes what it holds), every record pushed reaches the output, every
// block is completed, and Run returns nil.
func TestRunCancelDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		c := collect(s)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		r.push(t, "a", "b")
		r.hold("held")
		select {
		case <-p.Done():
			t.Fatal("Done closed while Run runs")
		default:
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("Run after ctx was cancelled = %v, want nil", err)
		}
		awaitDone(t, p)
		if !stopCalled(r) {
			t.Error("the receiver's Stop was not called")
		}
		if diff := cmp.Diff([]string{"a", "b", "held"}, records(c)); diff != "" {
			t.Errorf("records output (-want +got):\n%s", diff)
		}
		if got := slices.Concat(r.completed...); len(got) != 2 {
			t.Errorf("completed blocks %v, want the 2 pushed", got)
		}
	})
}

// stopListener calls Stop on p when the first batch with records completes.
type stopListener struct {
	NopListener
	p *Pipeline
}

func (l *stopListener) BatchCompleted(b BatchInfo) {
	if b.Records > 0 {
		l.p.Stop()
	}
}

// TestStopFromInside checks that Stop returns at once when called from an
// output or a Listener, which the pipeline waits for, and that Run then
// returns nil.
func TestStopFromInside(t *testing.T) {
	tests := []struct {
		name     string
		listener bool
	}{
		{"output", false},
		{"listener", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &stopListener{}
				cfg := Config{}
				if tt.listener {
					cfg.Listeners = []Listener{l}
				}
				p, r, s := newTest[string](t, cfg)
				l.p = p
				c := collect(s)
				if !tt.listener {
					ForEachBatch(s, func(_ context.Context, b *batch.Batch[string]) error {
						if b.Len() > 0 {
							p.Stop()
						}
						return nil
					})
				}
				errc := start(t, p)
				r.push(t, "a")
				if err := <-errc; err != nil {
					t.Fatalf("Run = %v, want nil after Stop", err)
				}
				awaitDone(t, p)
				if diff := cmp.Diff([]string{"a"}, records(c)); diff != "" {
					t.Errorf("records output (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestDrainFromOutput checks that Drain, called from an output with the
// ctx it was given, requests the drain without waiting for itself, and
// that the drain then finishes: the held records are output too.
func TestDrainFromOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		c := collect(s)
		drained := make(chan error, 1) // outputs run one batch at a time
		ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
			if b.Len() > 0 && len(drained) == 0 {
				drained <- p.Drain(ctx)
			}
			return nil
		})
		errc := start(t, p)
		r.push(t, "a")
		r.hold("held")
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v, want nil after Drain", err)
		}
		awaitDone(t, p)
		if err := <-drained; err != nil {
			t.Errorf("Drain from an output = %v, want nil", err)
		}
		if diff := cmp.Diff([]string{"a", "held"}, records(c)); diff != "" {
			t.Errorf("records output (-want +got):\n%s", diff)
		}
	})
}

// hangingStop is a test receiver whose Stop hangs until its ctx is done,
// as a Stop stuck on a DynamoDB call does; its Start then runs until the
// pipeline stops now.
type hangingStop struct{ *testReceiver[string] }

func (h hangingStop) Stop(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// newHanging returns a pipeline with cfg reading a hangingStop receiver,
// whose output blocks on the first batch with records until the pipeline
// stops now; started is closed when it does.
func newHanging(t *testing.T, cfg Config) (p *Pipeline, r hangingStop, started <-chan struct{}) {
	t.Helper()
	p, err := NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r = hangingStop{newTestReceiver[string]()}
	st := make(chan struct{})
	ForEachBatch(From(p, r), func(ctx context.Context, b *batch.Batch[string]) error {
		if b.Len() == 0 {
			return nil
		}
		close(st)
		<-ctx.Done()
		return ctx.Err()
	})
	return p, r, st
}

// TestDrainGivesUp checks that Drain(ctx), with a receiver whose Stop hangs
// and a batch that does not finish, returns once ctx expires with a
// *DrainError naming what was left, and that Run then returns it too.
func TestDrainGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r, started := newHanging(t, Config{})
		errc := start(t, p)
		r.push(t, "a", "b")
		<-started
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		err := p.Drain(ctx)
		var de *DrainError
		if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Drain = %v, want a *DrainError wrapping context.DeadlineExceeded", err)
		}
		checkLeft(t, de)
		runErr := <-errc
		if !errors.As(runErr, &de) {
			t.Errorf("Run = %v, want the *DrainError", runErr)
		}
		awaitDone(t, p)
	})
}

// TestRunDrainTimeout checks that the drain Run starts when its ctx is
// cancelled is bounded by Config.DrainTimeout: past it, Run stops now and
// returns a *DrainError wrapping ErrDrainTimeout.
func TestRunDrainTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r, started := newHanging(t, Config{DrainTimeout: 3 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		r.push(t, "a", "b")
		<-started
		cancel()
		err := <-errc
		var de *DrainError
		if !errors.As(err, &de) || !errors.Is(err, ErrDrainTimeout) {
			t.Fatalf("Run = %v, want a *DrainError wrapping ErrDrainTimeout", err)
		}
		checkLeft(t, de)
		awaitDone(t, p)
	})
}

// checkLeft checks what a drain of newHanging's pipeline left: the block
// of the batch that never finished, with its records, and the receiver.
func checkLeft(t *testing.T, de *DrainError) {
	t.Helper()
	type left struct {
		Blocks, Records int
		Receivers       []int
	}
	want := left{Blocks: 1, Records: 2, Receivers: []int{0}}
	if diff := cmp.Diff(want, left{de.Blocks, de.Records, de.Receivers}); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
	if de.Batches < 1 {
		t.Errorf("Batches = %d, want at least the one running", de.Batches)
	}
	for _, s := range []string{"drain gave up", "1 blocks (2 records) not completed", "receivers of sources [0] not stopped"} {
		if !strings.Contains(de.Error(), s) {
			t.Errorf("error %q does not say %q", de.Error(), s)
		}
	}
}

// drainListener calls Drain, with a ctx of its own and waiting, from the
// first BatchCompleted of a batch with records.
type drainListener struct {
	NopListener
	p       *Pipeline
	drained chan error // 1 slot
}

func (l *drainListener) BatchCompleted(b BatchInfo) {
	if b.Records > 0 && len(l.drained) == 0 {
		l.drained <- l.p.Drain(context.Background())
	}
}

// TestDrainFromListener checks that a Listener may call Drain and wait for
// it: listener events are delivered on a goroutine of their own, so the
// drain goes on without it, the held records are output, Drain returns nil
// and so does Run.
func TestDrainFromListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &drainListener{drained: make(chan error, 1)}
		p, r, s := newTest[string](t, Config{Listeners: []Listener{l}})
		l.p = p
		c := collect(s)
		errc := start(t, p)
		r.push(t, "a")
		r.hold("held")
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v, want nil after Drain", err)
		}
		awaitDone(t, p)
		if err := <-l.drained; err != nil {
			t.Errorf("Drain from a Listener = %v, want nil", err)
		}
		if diff := cmp.Diff([]string{"a", "held"}, records(c)); diff != "" {
			t.Errorf("records output (-want +got):\n%s", diff)
		}
	})
}

// blockingListener blocks in BatchCompleted until release is closed.
type blockingListener struct {
	NopListener
	release chan struct{}
}

func (l blockingListener) BatchCompleted(BatchInfo) { <-l.release }

// TestSlowListenerDoesNotDelayBatches checks that batches go on while a
// Listener is stuck, and that Run still delivers every event before it
// returns.
func TestSlowListenerDoesNotDelayBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := blockingListener{release: make(chan struct{})}
		rec := &recordingListener{}
		p, r, s := newTest[string](t, Config{Listeners: []Listener{l, rec}})
		c := collect(s)
		errc := start(t, p)
		for _, v := range []string{"a", "b", "c"} {
			r.push(t, v)
			time.Sleep(p.BatchInterval())
		}
		synctest.Wait()
		if diff := cmp.Diff([]string{"a", "b", "c"}, records(c)); diff != "" {
			t.Errorf("records output while a listener is stuck (-want +got):\n%s", diff)
		}
		close(l.release)
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if rec.completed() < 3 {
			t.Errorf("%d BatchCompleted events delivered by the time Run returned, want every batch's", rec.completed())
		}
	})
}

// recordingListener counts completed batches.
type recordingListener struct {
	NopListener
	mu sync.Mutex
	n  int
}

func (l *recordingListener) BatchCompleted(BatchInfo) { l.mu.Lock(); l.n++; l.mu.Unlock() }

func (l *recordingListener) completed() int { l.mu.Lock(); defer l.mu.Unlock(); return l.n }

// TestNilContext checks that Run and Drain given a nil ctx say so, with an
// error wrapping ErrInvalidConfig, instead of panicking; the Pipeline stays
// unstarted, so Run with a context then runs it.
func TestNilContext(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, _, s := newTest[string](t, Config{})
		Print(s, 1)
		var nilCtx context.Context // a nil ctx, as a user's unset variable gives
		if err := p.Run(nilCtx); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Run: ctx is nil") {
			t.Errorf("Run(nil) = %v, want an error wrapping ErrInvalidConfig saying ctx is nil", err)
		}
		if err := p.Drain(nilCtx); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Drain: ctx is nil") {
			t.Errorf("Drain(nil) = %v, want an error wrapping ErrInvalidConfig saying ctx is nil", err)
		}
		p.Stop()
		if err := p.Run(t.Context()); err != nil {
			t.Errorf("Run after Run(nil) = %v, want nil (stopped before it started)", err)
		}
	})
}

// TestNilPipeline checks that the methods of a nil *Pipeline (a variable
// left unset, or NewPipeline's result used despite its error) say so,
// with an error wrapping ErrInvalidConfig that names the fix, instead of
// panicking; those without an error do nothing.
func TestNilPipeline(t *testing.T) {
	var p *Pipeline
	for name, call := range map[string]func() error{
		"Run":      func() error { return p.Run(t.Context()) },
		"Validate": p.Validate,
		"Drain":    func() error { return p.Drain(t.Context()) },
	} {
		err := call()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name+": Pipeline is nil") || !strings.Contains(err.Error(), "NewPipeline") {
			t.Errorf("%s on a nil Pipeline = %v, want an error wrapping ErrInvalidConfig saying it is nil and naming NewPipeline", name, err)
		}
	}
	p.Stop()
	if p.Done() != nil || p.BatchInterval() != 0 || len(p.Shape().Sources) != 0 {
		t.Errorf("nil Pipeline: Done %v, BatchInterval %v, Shape %v; want nil, 0, empty", p.Done(), p.BatchInterval(), p.Shape())
	}
}
