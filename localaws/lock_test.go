package localaws

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestExclusiveCreateLock checks the portable lock on every platform (it is
// the only one on Windows): a second taker waits until the first unlocks or
// its ctx ends, and the file is removed on unlock.
func TestExclusiveCreateLock(t *testing.T) {
	t.Parallel()
	lock := filepath.Join(t.TempDir(), "sub", "install.lock")
	unlock, err := lockExclusiveCreate(t.Context(), lock, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if _, err := lockExclusiveCreate(ctx, lock, cancel); !errors.Is(err, context.Canceled) {
		t.Fatalf("lock taken and ctx cancelled: got %v, want context.Canceled", err)
	}
	got := make(chan error, 1)
	contended := make(chan struct{})
	go func() {
		unlock2, err := lockExclusiveCreate(t.Context(), lock, func() { close(contended) })
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	select {
	case <-contended:
	case err := <-got:
		t.Fatalf("second taker got the lock while the first held it (err %v)", err)
	}
	unlock()
	unlock() // idempotent
	if err := <-got; err != nil {
		t.Fatalf("second taker after unlock: %v", err)
	}
	if _, err := os.Stat(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock file after unlock: stat err %v, want not exist", err)
	}
}

// TestExclusiveCreateLockStale checks that a lock file its holder stopped
// refreshing (the holder died) is taken over.
func TestExclusiveCreateLockStale(t *testing.T) {
	t.Parallel()
	lock := filepath.Join(t.TempDir(), "install.lock")
	if err := os.WriteFile(lock, []byte("12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * lockStaleAfter)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	unlock, err := lockExclusiveCreate(ctx, lock, nil)
	if err != nil {
		t.Fatalf("stale lock not taken over: %v", err)
	}
	unlock()
}
