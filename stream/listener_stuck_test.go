package stream_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// stuckListener never returns from BatchCompleted until release is closed
// (a metrics push to a hung endpoint, say).
type stuckListener struct {
	stream.NopListener
	release chan struct{}
}

func (l stuckListener) BatchCompleted(stream.BatchInfo) { <-l.release }

// TestStuckListenerDoesNotHoldShutdown: a Listener stuck in a method held
// Run for ever: neither the drain's bound nor Stop made it return, so a
// worker told to stop never exited by itself. Run now waits for listeners
// at most Config.DrainTimeout, then returns, saying so at ERROR with the
// listener and the fix.
func TestStuckListenerDoesNotHoldShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := stuckListener{release: make(chan struct{})}
		defer close(l.release)
		var logs strings.Builder
		p, err := stream.NewPipeline(stream.Config{DrainTimeout: 5 * time.Second, Listeners: []stream.Listener{l},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		src, _ := memory.New[string](memory.Config{})
		stream.ForEach(stream.From(p, src), func(context.Context, string) error { return nil })
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		src.Push("a")
		time.Sleep(3 * time.Second)
		cancel() // SIGTERM: drain, bounded by DrainTimeout (5s)
		p.Stop() // and even Stop
		start := time.Now()
		select {
		case <-errc:
		case <-time.After(time.Hour):
			t.Fatal("Run has not returned an hour after its ctx was cancelled and Stop was called (DrainTimeout 5s): a stuck Listener holds the shutdown")
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Errorf("Run returned %v after Stop, want within DrainTimeout (5s) of it", waited)
		}
		for _, want := range []string{"level=ERROR", "a listener has not returned", "stuckListener", "must return"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("logs lack %q:\n%s", want, logs.String())
			}
		}
	})
}
