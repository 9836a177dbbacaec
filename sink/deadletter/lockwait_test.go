package deadletter_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/sink/deadletter"
)

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestOpenWaitsForAnExitingPredecessor checks, in virtual time, that Open
// given a directory another Dir holds waits for it to be released, as a
// predecessor that is still exiting releases it, the way the recovery
// log's and the file sink's directories do: a restart whose predecessor
// was still exiting failed at once with ErrLocked. The wait is logged at
// WARN (on slog.Default) and bounded by DefaultLockWait.
func TestOpenWaitsForAnExitingPredecessor(t *testing.T) {
	var logs lockedBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		first, err := deadletter.Open(dir)
		if err != nil {
			t.Fatal(err)
		}

		start := time.Now()
		if _, err := deadletter.Open(dir); !errors.Is(err, deadletter.ErrLocked) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("Open while another Dir holds %s: got %v, want ErrLocked naming it", dir, err)
		}
		if waited := time.Since(start); waited != deadletter.DefaultLockWait {
			t.Errorf("Open failed after %v, want after %v", waited, deadletter.DefaultLockWait)
		}
		if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "waiting for it to exit") {
			t.Errorf("the wait was not logged at WARN: %q", got)
		}

		// The predecessor exits 3 s into the wait: Open succeeds then.
		go func() {
			time.Sleep(3 * time.Second)
			first.Close()
		}()
		start = time.Now()
		if d, err := deadletter.Open(dir); err != nil {
			t.Errorf("Open once the predecessor exited: %v", err)
		} else {
			d.Close()
		}
		if waited := time.Since(start); waited < 3*time.Second || waited > 4*time.Second {
			t.Errorf("Open took %v, want from 3s to 4s (the holder exits at 3s, tries are at most 0.5s apart)", waited)
		}
	})
}
