package dirlock_test

import (
	"errors"
	"testing"

	"github.com/weirstream/weir/internal/dirlock"
)

func TestAcquireIsExclusiveUntilRelease(t *testing.T) {
	dir := t.TempDir()
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
