package stream

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/clock"
)

// bus delivers listener events, in the order they were posted, on a
// goroutine of its own, as Spark's listener bus does: a slow Listener never
// holds up a batch, and a Listener may call any method of the Pipeline,
// Drain included, without waiting for itself. The queue is unbounded: an
// event is a few words, and there are a handful per batch; but a Listener
// that does not keep up is warned about at WARN once busBacklogWarn events
// wait, and again as the backlog doubles, and at INFO once it is
// delivered, so that it neither blocks the pipeline nor grows unseen. A
// Listener that panics is told nothing more: its panic is logged at ERROR,
// with its stack, and the pipeline and the other listeners go on (Spark's
// bus logs a listener's exception and goes on too).
type bus struct {
	listeners []Listener
	logger    *slog.Logger
	clk       clock.Clock
	failed    []bool       // by listener: it panicked; run's only
	calling   atomic.Int64 // 1 + the index of the listener run is calling; 0 if none

	mu      sync.Mutex
	queue   []func(Listener)
	pending int           // events posted and not yet delivered to every listener
	warnAt  int           // pending at which post warns next: busBacklogWarn, doubled after each warning
	slow    int           // the listener named by the last backlog warning; -1: none known
	wake    chan struct{} // 1 slot: events were posted, or close was called
	closed  bool
	done    chan struct{} // closed by run once every event is delivered after close
}

// newBus returns a bus for ls, which logs to logger and times its waits on
// clk; run must be called (in its own goroutine) unless ls is empty.
func newBus(ls []Listener, logger *slog.Logger, clk clock.Clock) *bus {
	return &bus{listeners: ls, logger: logger, clk: clk, failed: make([]bool, len(ls)),
		warnAt: busBacklogWarn, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// busBacklogWarn is the number of events waiting for the listeners at which
// the bus first warns that a Listener does not keep up. There are about
// three events a batch, so 1000 is minutes of batches at the default batch
// interval, far more than a Listener that keeps up leaves waiting, and yet
// only tens of kilobytes.
const busBacklogWarn = 1000

// post queues an event for every listener. It never blocks.
func (b *bus) post(f func(Listener)) {
	if len(b.listeners) == 0 {
		return
	}
	b.mu.Lock()
	b.queue = append(b.queue, f)
	b.pending++
	n, warn := b.pending, b.pending >= b.warnAt
	if warn {
		b.warnAt *= 2
		b.slow = int(b.calling.Load()) - 1
	}
	slow := b.slow
	b.mu.Unlock()
	b.signal()
	if warn {
		b.logger.Warn("stream: listener events pile up: a listener does not keep up",
			append(b.listenerArgs(slow), "queued", n,
				"fix", "a Listener's methods must return quickly: hand slow work to a goroutine of your own")...)
	}
}

// delivered counts one event as delivered to every listener, and says at
// INFO when a backlog warned about is delivered.
func (b *bus) delivered() {
	b.mu.Lock()
	b.pending--
	drained := b.pending == 0 && b.warnAt > busBacklogWarn
	if drained {
		b.warnAt = busBacklogWarn
	}
	slow := b.slow
	b.mu.Unlock()
	if drained {
		b.logger.Info("stream: listener events caught up: every event queued was delivered", b.listenerArgs(slow)...)
	}
}

// listenerArgs returns the log attributes naming listener i, none if i < 0.
func (b *bus) listenerArgs(i int) []any {
	if i < 0 {
		return nil
	}
	return []any{"listener", i, "type", fmt.Sprintf("%T", b.listeners[i])}
}

func (b *bus) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// run delivers the queued events until close was called and every event
// posted before it is delivered; then it closes done.
func (b *bus) run() {
	defer close(b.done)
	for range b.wake {
		b.mu.Lock()
		q, closed := b.queue, b.closed
		b.queue = nil
		b.mu.Unlock()
		for _, f := range q {
			for i, l := range b.listeners {
				if !b.failed[i] {
					b.failed[i] = !b.deliver(i, l, f)
				}
			}
			b.delivered()
		}
		if closed {
			b.mu.Lock()
			rest := len(b.queue)
			b.mu.Unlock()
			if rest == 0 {
				return
			}
			b.signal()
		}
	}
}

// close asks run to return once the events posted so far are delivered,
// and waits for it, for at most bound. Events posted after close are
// delivered too if run has not returned yet, and dropped otherwise:
// nothing posts after the engine has ended. Since Run waits here, a
// Listener that does not return is warned about at WARN after
// stopWarnAfter, and again as the wait doubles; past bound (the Run's
// shutdown bound, Config.DrainTimeout), close logs at ERROR and returns,
// leaving the listener's goroutine and the events it has not delivered:
// a stuck listener must not keep a worker from exiting.
func (b *bus) close(bound time.Duration) {
	if len(b.listeners) == 0 {
		return
	}
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
	ended := make(chan struct{})
	var gaveUp atomic.Bool
	timer := b.clk.NewTimer(bound)
	defer timer.Stop()
	go func() {
		defer close(ended)
		select {
		case <-b.done:
		case <-timer.C():
			gaveUp.Store(true)
		}
	}()
	waitWarning(b.clk, ended, stopWarnAfter, func(waited time.Duration) {
		if i := int(b.calling.Load()) - 1; i >= 0 {
			b.logger.Warn("stream: Run waits for a listener that has not returned, to deliver the last events",
				append(b.listenerArgs(i), "waited", waited.Round(time.Second), "fix", listenerFix)...)
		}
	})
	if !gaveUp.Load() {
		return
	}
	args := []any{"waited", bound, "fix", listenerFix}
	if i := int(b.calling.Load()) - 1; i >= 0 {
		args = append(b.listenerArgs(i), args...)
	}
	b.logger.Error("stream: Run returns without delivering the last events: a listener has not returned within the drain timeout (Config.DrainTimeout)", args...)
}

// listenerFix is the fix for a Listener that does not return.
const listenerFix = "a Listener's methods must return: hand slow work to a goroutine of your own"

// deliver calls f with listener i, l, and reports whether it returned; a
// panic is recovered and logged.
func (b *bus) deliver(i int, l Listener, f func(Listener)) (ok bool) {
	b.calling.Store(int64(i) + 1)
	defer func() {
		b.calling.Store(0)
		if v := recover(); v != nil {
			b.logger.Error("stream: a listener panicked: it is told nothing more", "listener", i,
				"type", fmt.Sprintf("%T", l), "panic", v, "stack", string(debug.Stack()),
				"fix", "a Listener must not panic: fix the bug its stack shows")
		}
	}()
	f(l)
	return true
}
