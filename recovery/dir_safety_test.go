package recovery_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
)

// victim returns the path of a file outside the log directory holding
// "victim", and a check that it still holds exactly that.
func victim(t *testing.T) (string, func()) {
	t.Helper()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("victim"), 0o600); err != nil {
		t.Fatal(err)
	}
	return target, func() {
		t.Helper()
		if b, err := os.ReadFile(target); err != nil || string(b) != "victim" {
			t.Errorf("the symlink's target holds %d bytes, not %q (%v); want it untouched", len(b), "victim", err)
		}
	}
}

// A segment replaced by a symbolic link is refused at open, and its target
// is neither truncated nor appended to.
func TestDirRefusesSymlinkedSegment(t *testing.T) {
	dir, _, _ := writeLog(t, 0)
	segs := segmentFiles(t, dir)
	last := segs[len(segs)-1]
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	// The target holds the segment's entries and a torn tail, which an
	// open that follows the link truncates.
	target := filepath.Join(t.TempDir(), "victim.log")
	want := append(data, 1, 2, 3)
	if err := os.WriteFile(target, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(last); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, last); err != nil {
		t.Fatal(err)
	}
	l, err := recovery.OpenDir(t.Context(), recovery.Dir(dir))
	if err == nil {
		recoverylog.Wrap(l, nil).Append(t.Context(), logtest.History()[0])
		l.Close()
	}
	if err == nil || !strings.Contains(err.Error(), last) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("OpenDir with a symlinked segment: got %v, want an error naming %s as a symbolic link", err, last)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != string(want) {
		t.Errorf("the symlink's target was changed (%d bytes, %v; want %d)", len(got), err, len(want))
	}
}

// A LOCK file planted as a symbolic link is refused, and its target not
// created.
func TestDirRefusesSymlinkedLock(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(target, filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
	l, err := recovery.OpenDir(t.Context(), recovery.Dir(dir))
	if err == nil {
		l.Close()
		t.Error("OpenDir with a symlinked LOCK: nil error")
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the symlink's target was created: %v", err)
	}
}

// Symbolic links planted at the temporary files' names of old, compact.tmp
// and snapshot.tmp, do not make Compact or PutSnapshot write their targets.
func TestDirTempFilesDoNotFollowSymlinks(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	l := openDir(t, recovery.Dir(dir))
	for _, e := range logtest.History() {
		mustAppend(t, l, e)
	}
	var checks []func()
	for _, name := range []string{"compact.tmp", "snapshot.tmp"} {
		target, untouched := victim(t)
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		checks = append(checks, untouched)
	}
	if _, err := l.PutSnapshot(ctx, 5000, []byte("state")); err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	if err := l.Compact(ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	for _, untouched := range checks {
		untouched()
	}
}

// A log directory that others can write is refused, naming the fix.
func TestDirRefusesWritableByOthers(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no file modes on Windows")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	l, err := recovery.OpenDir(t.Context(), recovery.Dir(dir))
	if err == nil {
		l.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "chmod go-w "+dir) {
		t.Fatalf("OpenDir of a directory of mode 0777: got %v, want an error naming chmod go-w", err)
	}
}

// The log's directory is created 0700 and its files 0600: the users'
// state is theirs only.
func TestDirModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no file modes on Windows")
	}
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "new", "log")
	l := openDir(t, recovery.DirConfig{Path: dir, SegmentSize: 300})
	for _, e := range logtest.History() {
		mustAppend(t, l, e)
	}
	ref, err := l.PutSnapshot(ctx, 5000, []byte("state"))
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, recoverylog.SnapshotTaken(5000, ref))
	if err := l.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, logtest.History()[0])
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("directory %s: mode %v, %v; want 0700", d, fi.Mode().Perm(), err)
		}
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if fi, err := de.Info(); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("file %s: mode %v, %v; want 0600", de.Name(), fi.Mode().Perm(), err)
		}
	}
}
