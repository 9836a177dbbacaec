package stream

import (
	"log/slog"
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
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		collect(s)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
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
