package recovery_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
)

// TestDirSnapshotTorn checks that a snapshot.tmp a crash tore is removed at
// open and leaves the current snapshot readable, and that a damaged
// snapshot file is a *CorruptError.
func TestDirSnapshotTorn(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	l := openDir(t, recovery.Dir(dir))
	ref, err := l.PutSnapshot(ctx, 1000, []byte("state at 1000"))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, recoverylog.SnapshotTaken(1000, ref))
	l.Close()
	// A crash in the middle of writing the next snapshot, in this version
	// (a temporary file of a fresh name) and in an earlier one.
	temps := []string{
		filepath.Join(dir, ".tmp-snapshot-00000000000000002000.snap.0123456789abcdef"),
		filepath.Join(dir, "snapshot.tmp"),
	}
	for _, tmp := range temps {
		if err := os.WriteFile(tmp, []byte("weirsnp1\x00\x01"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l = openDir(t, recovery.Dir(dir))
	for _, tmp := range temps {
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after open: %v", filepath.Base(tmp), err)
		}
	}
	sref := recoverylog.SnapshotRef{Time: 1000, Ref: ref}
	got, err := l.GetSnapshot(ctx, sref)
	if err != nil || string(got) != "state at 1000" {
		t.Fatalf("GetSnapshot = %q, %v; want the snapshot at 1000", got, err)
	}
	var ce *recovery.CorruptError
	if _, err := l.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 2000, Ref: ref}); !errors.As(err, &ce) {
		t.Errorf("GetSnapshot of the snapshot at 1000 as the one at 2000: got %v, want a *CorruptError", err)
	}
	// Damage the snapshot file.
	path := filepath.Join(dir, ref)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.GetSnapshot(ctx, sref); !errors.As(err, &ce) || !strings.Contains(ce.Path, ref) {
		t.Errorf("GetSnapshot of a damaged file: got %v, want a *CorruptError naming %s", err, ref)
	}
	if _, err := l.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 1000, Ref: "../LOCK"}); !errors.Is(err, recovery.ErrNoSnapshot) {
		t.Errorf("GetSnapshot of a name that is not a snapshot's: got %v, want ErrNoSnapshot", err)
	}
}
