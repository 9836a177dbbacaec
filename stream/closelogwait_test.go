package stream

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/memory"
)

// closeWaitsOpener opens store's log as one whose Close does not return
// until release is closed.
type closeWaitsOpener struct {
	store   *recoverylog.MemoryStore
	release chan struct{}
}

type closeWaitsLog struct {
	recovery.Log
	release chan struct{}
}

func (o *closeWaitsOpener) Open(ctx context.Context) (recovery.Log, error) {
	l, err := o.store.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &closeWaitsLog{Log: l, release: o.release}, nil
}

func (l *closeWaitsLog) Close() error {
	<-l.release
	return l.Log.Close()
}

// TestRunWaitingForLogCloseWarns stops a pipeline whose recovery log's
// Close does not return: Run cannot return, and the driver warns that it
// waits for the log's Close, naming the log, after 1, 2 and 4 minutes, not
// never (every other watcher has ended); Run returns once Close does.
func TestRunWaitingForLogCloseWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		opener := &closeWaitsOpener{store: recoverylog.NewMemory(), release: make(chan struct{})}
		p, err := NewPipeline(Config{BatchInterval: time.Second, Recovery: opener,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[string](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		Print(From(p, src), 1)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(5 * time.Second)
		p.Stop()
		time.Sleep(5 * time.Minute)
		warned := logs.matching("level=WARN", "recovery log's Close", "*stream.closeWaitsOpener")
		if len(warned) != 3 {
			t.Errorf("a Run waiting 5 minutes for its recovery log's Close logged %d such warnings, want 3 (at 1, 2 and 4 minutes); WARN lines:\n%s",
				len(warned), strings.Join(logs.matching("level=WARN"), ""))
		}
		close(opener.release)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
