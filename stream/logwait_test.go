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

// The waits of a Run on its recovery log outside every other watcher (its
// Open before they start, its Close after they end) are watched too.

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

// runLogWait runs, in a synctest bubble, a pipeline whose recovery log is
// opener's, stops it after stopAfter, and checks that in the 5 minutes
// after the Run started the driver warned 3 times (at 1, 2 and 4
// minutes) that it waits for what, in lines holding every one of substrs;
// then it closes release and checks that Run returns nil.
func runLogWait(t *testing.T, opener recovery.Opener, release chan struct{}, stopAfter time.Duration, what string, substrs ...string) {
	t.Helper()
	logs := &logLines{}
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
	time.Sleep(stopAfter)
	p.Stop()
	time.Sleep(5 * time.Minute)
	if warned := logs.matching(append([]string{"level=WARN"}, substrs...)...); len(warned) != 3 {
		t.Errorf("a Run waiting 5 minutes for %s logged %d such warnings, want 3 (at 1, 2 and 4 minutes); WARN lines:\n%s",
			what, len(warned), strings.Join(logs.matching("level=WARN"), ""))
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestRunWaitingForLogOpenWarns runs a pipeline whose recovery log's Open
// ignores its ctx and does not return, and stops it: Run cannot start nor
// stop, and the driver warns that it waits for the log to open, naming the
// log and the fix, after 1, 2 and 4 minutes, not never (the stop watcher
// and the stall watchers start after the log is open); Run returns once
// Open does.
func TestRunWaitingForLogOpenWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opener := &deafOpener{store: recoverylog.NewMemory(), release: make(chan struct{})}
		runLogWait(t, opener, opener.release, 30*time.Second, "its recovery log to open",
			"recovery log to open", "*stream.deafOpener")
	})
}

// TestRunWaitingForLogCloseWarns stops a pipeline whose recovery log's
// Close does not return: Run cannot return, and the driver warns that it
// waits for the log's Close, naming the log, after 1, 2 and 4 minutes, not
// never (every other watcher has ended); Run returns once Close does.
func TestRunWaitingForLogCloseWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opener := &closeWaitsOpener{store: recoverylog.NewMemory(), release: make(chan struct{})}
		runLogWait(t, opener, opener.release, 5*time.Second, "its recovery log's Close",
			"recovery log's Close", "*stream.closeWaitsOpener")
	})
}
