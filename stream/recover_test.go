package stream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/internal/recoverylog"
)

// TestRecoveryLogStartIsLogged checks what a Run says of its recovery log:
// a first start on an empty log says so, rather than "resuming" from a last
// batch at 1970, and a restart says it resumes, with its last batch.
func TestRecoveryLogStartIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := recoverylog.NewMemory()
		for run, want := range []string{
			`level=INFO msg="stream: the recovery log is empty: starting afresh"`,
			`level=INFO msg="stream: resuming from the recovery log" pending=0 unallocated=0 last="946684801000 ms (2000-01-01T00:00:01Z)"`,
		} {
			var out lockedLog
			p, _, s := newTest[string](t, Config{Recovery: log, Logger: slog.New(slog.NewTextHandler(&out, nil))})
			collect(s)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- p.Run(ctx) }()
			time.Sleep(1500 * time.Millisecond) // one batch, at 1s
			cancel()
			if err := <-errc; err != nil {
				t.Fatalf("Run %d = %v", run+1, err)
			}
			if got := out.String(); !strings.Contains(got, want) || strings.Contains(got, "1970") {
				t.Errorf("Run %d's log:\n%s\nwant %s, and no batch of 1970", run+1, got, want)
			}
		}
	})
}

// lockedLog is a log's output, written and read from any goroutine.
type lockedLog struct {
	mu  sync.Mutex
	out strings.Builder
}

func (l *lockedLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Write(b)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}
