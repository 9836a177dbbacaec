package recovery_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
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

// TestDirAppendDuringSnapshot checks that an Append (a block pushed, a
// batch cut) completes while a state snapshot is being written, held
// here, rather than waiting for the write of a large state; and that the
// snapshot, once written and referenced, and the entry are both read back
// after a restart.
func TestDirAppendDuringSnapshot(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	raw, err := recovery.OpenDir(ctx, recovery.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	recovery.HoldSnapshotWritesForTest(raw, func() { close(held); <-release })
	l := recoverylog.Wrap(raw, nil)
	data := []byte("state")
	var ref string
	put := make(chan error, 1)
	go func() {
		var err error
		ref, err = l.PutSnapshot(ctx, 7000, data)
		put <- err
	}()
	<-held
	appended := make(chan error, 1)
	go func() { appended <- l.Append(ctx, logtest.Block(0, 1)) }()
	bound := time.NewTimer(time.Minute) // a bound on a wait that never ends unless the Append waits for the write, not a measure
	defer bound.Stop()
	waited := false
	select {
	case err := <-appended:
		if err != nil {
			t.Fatalf("Append during a snapshot's write: %v", err)
		}
	case <-bound.C:
		waited = true
		t.Errorf("an Append waited a minute for a state snapshot's write, held meanwhile: appends must not wait for the write of the state")
	}
	close(release)
	if err := <-put; err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	if waited {
		if err := <-appended; err != nil {
			t.Fatalf("Append after the snapshot's write: %v", err)
		}
	}
	mustAppend(t, l, recoverylog.SnapshotTaken(7000, ref))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	next := openDir(t, recovery.Dir(dir))
	entries, err := next.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []recoverylog.Kind
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	if !slices.Equal(kinds, []recoverylog.Kind{recoverylog.KindBlockStored, recoverylog.KindSnapshot}) {
		t.Errorf("entries read after a restart: %v, want a block then the snapshot", kinds)
	}
	got, err := next.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 7000, Ref: ref})
	if err != nil || string(got) != string(data) {
		t.Fatalf("GetSnapshot after a restart: %q, %v; want %q", got, err, data)
	}
}
