package stream

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// panicListener panics in every BatchCompleted, after counting it.
type panicListener struct {
	NopListener
	calls atomic.Int32
}

func (l *panicListener) BatchCompleted(BatchInfo) {
	l.calls.Add(1)
	panic("listener bug")
}

// countListener counts the BatchCompleted events it gets.
type countListener struct {
	NopListener
	completed atomic.Int32
}

func (l *countListener) BatchCompleted(BatchInfo) { l.completed.Add(1) }

// TestListenerPanic runs a pipeline with a Listener that panics: the
// process goes on, the panic is logged once at ERROR with its stack, the
// listener is told nothing more, the other listeners get every event, and
// Run returns nil when stopped.
func TestListenerPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		bad, good := &panicListener{}, &countListener{}
		p, r, s := newTest[string](t, Config{BatchInterval: time.Second, Listeners: []Listener{bad, good},
			Logger: logs.logger()})
		collect(s)
		errc := start(t, p)
		r.push(t, "a")
		time.Sleep(5*time.Second + 500*time.Millisecond)
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if n := good.completed.Load(); n < 5 {
			t.Errorf("the other listener got %d BatchCompleted events in 5 batch intervals, want at least 5", n)
		}
		if n := bad.calls.Load(); n != 1 {
			t.Errorf("the panicking listener was called %d times, want 1 (none after its panic)", n)
		}
		errs := logs.matching("level=ERROR", "listener bug", "goroutine")
		if len(errs) != 1 {
			t.Errorf("want one ERROR line with the panic and its stack; lines:\n%s", strings.Join(logs.matching(), ""))
		}
	})
}

// TestStopWaitingForListenerWarns stops a pipeline whose Listener does not
// return: Run waits to deliver the events queued, and the driver warns,
// naming the listener, after 1, 2 and 4 minutes; Run returns nil once the
// listener does, within Config.DrainTimeout (see
// TestStuckListenerDoesNotHoldShutdown for one that never does).
func TestStopWaitingForListenerWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		l := blockingListener{release: make(chan struct{})}
		p, r, s := newTest[string](t, Config{BatchInterval: time.Second, Listeners: []Listener{l},
			Logger: logs.logger(), DrainTimeout: 10 * time.Minute})
		collect(s)
		errc := start(t, p)
		r.push(t, "a")
		time.Sleep(1500 * time.Millisecond)
		p.Stop()
		time.Sleep(5 * time.Minute)
		warned := logs.matching("level=WARN", "listener", "blockingListener")
		if len(warned) != 3 {
			t.Errorf("a Run waiting 5 minutes for a listener logged %d warnings naming it, want 3 (at 1, 2 and 4 minutes); WARN lines:\n%s",
				len(warned), strings.Join(logs.matching("level=WARN"), ""))
		}
		close(l.release)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}

// TestSlowListenerBacklogWarns runs a pipeline whose Listener does not
// return: the batches go on, the events queued for it are warned about at
// WARN, naming it, at busBacklogWarn and at twice that, and once it returns
// and they are delivered, an INFO line says so.
func TestSlowListenerBacklogWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		l := blockingListener{release: make(chan struct{})}
		p, r, s := newTest[string](t, Config{BatchInterval: time.Second, Listeners: []Listener{l},
			Logger: logs.logger()})
		c := collect(s)
		errc := start(t, p)
		r.push(t, "a")
		// Three or more events a batch: past 2*busBacklogWarn and short of
		// 4*busBacklogWarn queued.
		time.Sleep(2 * busBacklogWarn / 3 * time.Second)
		r.push(t, "b")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := len(c.outs()); got < 2 {
			t.Errorf("the outputs got %d batches with records while the listener hung, want 2", got)
		}
		warned := logs.matching("level=WARN", "pile up", "listener=0", "blockingListener")
		if len(warned) != 2 {
			t.Errorf("%d backlog warnings naming the listener, want 2 (at %d and %d events); WARN lines:\n%s",
				len(warned), busBacklogWarn, 2*busBacklogWarn, strings.Join(logs.matching("level=WARN"), ""))
		}
		close(l.release)
		synctest.Wait()
		if caught := logs.matching("level=INFO", "caught up", "blockingListener"); len(caught) != 1 {
			t.Errorf("%d INFO lines saying the listener caught up, want 1; lines:\n%s", len(caught), strings.Join(logs.matching(), ""))
		}
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
