package dirlock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/dirlock"
	"github.com/weirstream/weir/internal/durable"
)

func openDir(t *testing.T) *durable.Dir {
	t.Helper()
	d, err := durable.OpenDir(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestAcquireIsExclusiveUntilRelease(t *testing.T) {
	dir := openDir(t)
	first, err := dirlock.Acquire(dir, "LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dirlock.Acquire(dir, "LOCK"); !errors.Is(err, dirlock.ErrLocked) {
		t.Fatalf("second Acquire: got %v, want ErrLocked", err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	again, err := dirlock.Acquire(dir, "LOCK")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	again.Release()
}

// A lock file planted as a symbolic link is refused, and its target is
// neither created nor locked.
func TestAcquireRefusesSymlink(t *testing.T) {
	dir := openDir(t)
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(target, dir.Join("LOCK")); err != nil {
		t.Fatal(err)
	}
	if l, err := dirlock.Acquire(dir, "LOCK"); !errors.Is(err, durable.ErrUnsafe) {
		if l != nil {
			l.Release()
		}
		t.Fatalf("Acquire through a symlink: got %v, want ErrUnsafe", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the symlink's target was created: %v", err)
	}
}

// TestFileWait checks, in virtual time, that FileWait takes a lock once its
// holder releases it, gives up after its bound, and stops with its ctx.
func TestFileWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := openDir(t)
		held, err := dirlock.Acquire(dir, "LOCK")
		if err != nil {
			t.Fatal(err)
		}
		open := func() *os.File {
			f, err := os.OpenFile(dir.Join("LOCK"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
		waits := 0
		start := time.Now()
		err = dirlock.FileWait(t.Context(), open(), clock.Real{}, 5*time.Second, func() { waits++ })
		if !errors.Is(err, dirlock.ErrLocked) || time.Since(start) != 5*time.Second || waits != 1 {
			t.Fatalf("FileWait on a held lock: %v after %v, %d waits; want ErrLocked after 5s, 1 wait", err, time.Since(start), waits)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := dirlock.FileWait(ctx, open(), clock.Real{}, 5*time.Second, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("FileWait past its ctx: %v, want DeadlineExceeded", err)
		}
		go func() {
			time.Sleep(2 * time.Second)
			held.Release()
		}()
		if err := dirlock.FileWait(t.Context(), open(), clock.Real{}, 5*time.Second, nil); err != nil {
			t.Fatalf("FileWait on a lock released at 2s: %v", err)
		}
	})
}
