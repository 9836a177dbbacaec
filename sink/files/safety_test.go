package files

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/weirstream/weir/batch"
)

// A symbolic link at a batch's name is not taken for the batch's file:
// Write fails naming it, writes nothing through it, and reports no
// success for a batch whose output it did not write.
func TestWriteRefusesSymlinkAtBatchName(t *testing.T) {
	s := newSink(t, Config[string]{})
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("victim"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, s.Path(1000)); err != nil {
		t.Fatal(err)
	}
	err := s.Write(t.Context(), batch.New(1000, nil, []string{"x"}))
	if err == nil || !strings.Contains(err.Error(), s.Path(1000)) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Write over a symlink: got %v, want an error naming %s as a symbolic link", err, s.Path(1000))
	}
	if got := read(t, target); got != "victim" {
		t.Errorf("the symlink's target holds %q, want it untouched", got)
	}
}

// A directory that others can write is refused, naming the fix.
func TestNewRefusesDirWritableByOthers(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no file modes on Windows")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config[string]{Dir: dir})
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "chmod go-w "+dir) {
		t.Fatalf("New on a directory of mode 0777: got %v, want an error naming chmod go-w", err)
	}
}

// umaskHelperEnv makes the test binary, started by TestUmaskHonoured, set
// its umask to 077, write a batch with Perm 0644 to a new directory it
// names, and print the modes of the directory and the file.
const umaskHelperEnv = "WEIR_FILES_UMASK_HELPER_DIR"

func umaskHelper(dir string) {
	setUmask(0o077)
	s, err := New(Config[string]{Dir: dir, Perm: 0o644})
	if err == nil {
		err = s.Write(context.Background(), batch.New(1000, nil, []string{"x"}))
	}
	var dm, fm fs.FileInfo
	if err == nil {
		dm, err = os.Stat(dir)
	}
	if err == nil {
		fm, err = os.Stat(s.Path(1000))
	}
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("%v %v\n", dm.Mode().Perm(), fm.Mode().Perm())
}

// The umask is honoured: Perm is the mode asked for, not forced.
func TestUmaskHonoured(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no umask on Windows")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), umaskHelperEnv+"="+filepath.Join(t.TempDir(), "out"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper process: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "-rwx------ -rw-------"; got != want {
		t.Errorf("with umask 077 and Perm 0644: modes %q, want %q", got, want)
	}
}

// A new directory is 0700 and its files 0600 by default.
func TestDefaultModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no file modes on Windows")
	}
	dir := filepath.Join(t.TempDir(), "out")
	s := newSink(t, Config[string]{Dir: dir})
	if err := s.Write(t.Context(), batch.New(1000, nil, []string{"x"})); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]fs.FileMode{dir: 0o700, s.Path(1000): 0o600, filepath.Join(dir, lockName): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
}
