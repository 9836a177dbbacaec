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

// deafOpener is a recovery.Opener whose Open ignores its ctx: it returns
// store only once release is closed.
type deafOpener struct {
	store   *recoverylog.MemoryStore
	release chan struct{}
}

func (o *deafOpener) Open(context.Context) (recovery.Log, error) {
	<-o.release
	return o.store.Open(context.Background())
}

// TestRunWaitingForLogOpenWarns runs a pipeline whose recovery log's Open
// ignores its ctx and does not return, and stops it: Run cannot start nor
// stop, and the driver warns that it waits for the log to open, naming the
// log and the fix, after 1, 2 and 4 minutes, not never (the stop watcher
// and the stall watchers start after the log is open); Run returns once
// Open does.
func TestRunWaitingForLogOpenWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		opener := &deafOpener{store: recoverylog.NewMemory(), release: make(chan struct{})}
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
		time.Sleep(30 * time.Second)
		p.Stop()
		time.Sleep(5*time.Minute - 30*time.Second)
		warned := logs.matching("level=WARN", "recovery log to open", "*stream.deafOpener")
		if len(warned) != 3 {
			t.Errorf("a Run waiting 5 minutes for its recovery log to open logged %d such warnings, want 3 (at 1, 2 and 4 minutes); WARN lines:\n%s",
				len(warned), strings.Join(logs.matching("level=WARN"), ""))
		}
		close(opener.release)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
