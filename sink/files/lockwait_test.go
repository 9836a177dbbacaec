package files

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestNewWaitsForAnExitingPredecessor checks, in virtual time, that New
// given a directory another Sink holds waits for it to be released, as a
// predecessor that is still exiting releases it, the way a directory
// recovery log's open does: a restart whose predecessor was still exiting
// failed at once with ErrLocked, before the pipeline's recovery log, which
// waits, was even opened. The wait is logged, bounded by LockWait, and
// none with a negative LockWait.
func TestNewWaitsForAnExitingPredecessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		var logs bytes.Buffer
		cfg := Config[string]{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		first := newSink(t, cfg)

		start := time.Now()
		if _, err := New(cfg); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("New while another Sink holds %s: got %v, want ErrLocked naming it", dir, err)
		}
		if waited := time.Since(start); waited != DefaultLockWait {
			t.Errorf("New failed after %v, want after %v", waited, DefaultLockWait)
		}
		if !strings.Contains(logs.String(), "locked by another Sink") {
			t.Errorf("the wait was not logged: %q", logs.String())
		}

		noWait := cfg
		noWait.LockWait = -1
		start = time.Now()
		if _, err := New(noWait); !errors.Is(err, ErrLocked) || time.Since(start) != 0 {
			t.Fatalf("New with LockWait -1: got %v after %v, want ErrLocked at once", err, time.Since(start))
		}

		// The predecessor exits 3 s into the wait: New succeeds then.
		go func() {
			time.Sleep(3 * time.Second)
			first.Close()
		}()
		start = time.Now()
		newSink(t, cfg)
		if waited := time.Since(start); waited < 3*time.Second || waited > 4*time.Second {
			t.Errorf("New took %v, want from 3s to 4s (the holder exits at 3s, tries are at most 0.5s apart)", waited)
		}
	})
}
