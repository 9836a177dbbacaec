package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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
