package durable_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/durable"
)

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := durable.SyncDir(dir); err != nil {
		t.Fatalf("SyncDir(%s): %v", dir, err)
	}
	if err := durable.SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncDir of a missing directory: nil error")
	}
}

func openDir(t *testing.T, path string, perm fs.FileMode) *durable.Dir {
	t.Helper()
	d, err := durable.OpenDir(path, perm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func skipModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows file modes do not tell who may write a file")
	}
}

// The directories OpenDir creates and the files created in them get the
// permission asked for (the owner's only by default), the umask being 0.
func TestOpenDirModes(t *testing.T) {
	skipModes(t)
	for _, tc := range []struct {
		perm          fs.FileMode
		dirMode, mode fs.FileMode
	}{
		{0, 0o700, 0o600},
		{0o640, 0o750, 0o640},
	} {
		t.Run(tc.perm.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a", "b")
			d := openDir(t, path, tc.perm)
			for _, p := range []string{path, filepath.Dir(path)} {
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != tc.dirMode {
					t.Errorf("directory %s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, tc.dirMode)
				}
			}
			f, err := d.Create("f", os.O_WRONLY)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if _, err := d.WriteFile("g", []byte("x")); err != nil {
				t.Fatal(err)
			}
			lock, err := d.Open("h", os.O_RDWR|os.O_CREATE)
			if err != nil {
				t.Fatal(err)
			}
			lock.Close()
			for _, name := range []string{"f", "g", "h"} {
				if fi, err := os.Stat(d.Join(name)); err != nil || fi.Mode().Perm() != tc.mode {
					t.Errorf("file %s: mode %v, %v; want %v", name, fi.Mode().Perm(), err, tc.mode)
				}
			}
		})
	}
}

// A directory that group or others can write is refused, naming the fix.
func TestOpenDirRefusesWritableByOthers(t *testing.T) {
	skipModes(t)
	for _, mode := range []fs.FileMode{0o777, 0o770, fs.ModeSticky | 0o777} {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			d, err := durable.OpenDir(path, 0)
			if err == nil {
				d.Close()
			}
			if !errors.Is(err, durable.ErrUnsafe) || !strings.Contains(err.Error(), "chmod go-w "+path) {
				t.Fatalf("OpenDir of a directory of mode %v: got %v, want ErrUnsafe naming chmod go-w", mode, err)
			}
		})
	}
}

// The directory given may be a symbolic link to a directory of the user's.
func TestOpenDirFollowsTheDirectorysOwnLink(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	d := openDir(t, link, 0)
	if _, err := d.WriteFile("f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(real, "f")); err != nil {
		t.Fatal(err)
	}
}

// plant makes name in d a symbolic link to a file outside holding "victim",
// and returns a check that the target was neither written nor truncated.
func plant(t *testing.T, d *durable.Dir, name string) func() {
	t.Helper()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("victim"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, d.Join(name)); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if b, err := os.ReadFile(target); err != nil || string(b) != "victim" {
			t.Errorf("the symlink's target holds %q, %v; want it untouched", b, err)
		}
	}
}

// No method opens a file through a symbolic link planted in the directory.
func TestSymlinksAreNotFollowed(t *testing.T) {
	d := openDir(t, filepath.Join(t.TempDir(), "state"), 0)
	for name, use := range map[string]func(string) error{
		"Open": func(name string) error {
			f, err := d.Open(name, os.O_WRONLY|os.O_APPEND)
			if err == nil {
				f.Write([]byte("appended"))
				f.Close()
			}
			return err
		},
		"Open O_TRUNC": func(name string) error {
			f, err := d.Open(name, os.O_WRONLY|os.O_TRUNC)
			if err == nil {
				f.Close()
			}
			return err
		},
		"Open O_CREATE": func(name string) error {
			f, err := d.Open(name, os.O_RDWR|os.O_CREATE)
			if err == nil {
				f.Truncate(0)
				f.Close()
			}
			return err
		},
		"ReadFile": func(name string) error { _, err := d.ReadFile(name); return err },
		"Lstat":    func(name string) error { _, err := d.Lstat(name); return err },
	} {
		t.Run(name, func(t *testing.T) {
			untouched := plant(t, d, name)
			if err := use(name); !errors.Is(err, durable.ErrUnsafe) || !strings.Contains(err.Error(), d.Join(name)) {
				t.Errorf("got %v, want ErrUnsafe naming %s", err, d.Join(name))
			}
			untouched()
		})
	}
	t.Run("Create", func(t *testing.T) {
		untouched := plant(t, d, "Create")
		f, err := d.Create("Create", os.O_WRONLY)
		if err == nil {
			f.Write([]byte("created"))
			f.Close()
		}
		if !errors.Is(err, fs.ErrExist) {
			t.Errorf("got %v, want ErrExist", err)
		}
		untouched()
	})
	t.Run("WriteFile", func(t *testing.T) {
		untouched := plant(t, d, "WriteFile")
		if _, err := d.WriteFile("WriteFile", []byte("new")); err != nil {
			t.Fatal(err)
		}
		untouched()
		if b, err := d.ReadFile("WriteFile"); err != nil || string(b) != "new" {
			t.Errorf("WriteFile replaced the link with %q, %v; want %q", b, err, "new")
		}
	})
}

// A directory where a file is kept is refused as not regular.
func TestOpenRefusesNonRegular(t *testing.T) {
	d := openDir(t, filepath.Join(t.TempDir(), "state"), 0)
	if err := os.Mkdir(d.Join("sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadFile("sub"); !errors.Is(err, durable.ErrUnsafe) {
		t.Errorf("ReadFile of a directory: got %v, want ErrUnsafe", err)
	}
}

// Temporary files have fresh names, told apart by TempOf, and WriteFile
// leaves none behind.
func TestCreateTemp(t *testing.T) {
	d := openDir(t, filepath.Join(t.TempDir(), "state"), 0)
	f1, n1, err := d.CreateTemp("x.log")
	if err != nil {
		t.Fatal(err)
	}
	f1.Close()
	f2, n2, err := d.CreateTemp("x.log")
	if err != nil {
		t.Fatal(err)
	}
	f2.Close()
	if n1 == n2 {
		t.Fatalf("two temporary files named %s", n1)
	}
	for _, n := range []string{n1, n2} {
		if final, ok := durable.TempOf(n); !ok || final != "x.log" {
			t.Errorf("TempOf(%q) = %q, %v; want x.log, true", n, final, ok)
		}
	}
	if _, ok := durable.TempOf("x.log"); ok {
		t.Error("TempOf of a final name: true")
	}
	for _, n := range []string{n1, n2} {
		if err := d.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.WriteFile("y", []byte("y")); err != nil {
		t.Fatal(err)
	}
	des, err := d.ReadDir()
	if err != nil || len(des) != 1 || des[0].Name() != "y" {
		t.Errorf("after WriteFile the directory holds %v, %v; want only y", des, err)
	}
}

func TestCheckPerm(t *testing.T) {
	for _, tc := range []struct {
		perm fs.FileMode
		want string
	}{
		{0, ""},
		{0o600, ""},
		{0o640, ""},
		{0o644, ""},
		{0o664, "Perm 0664: must not let group or others write"},
		{0o400, "Perm 0400: must let the owner read and write"},
		{fs.ModeDir | 0o600, "Perm drw-------: must hold permission bits only"},
	} {
		err := durable.CheckPerm("Perm", tc.perm)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckPerm(%v) = %v; want %q", tc.perm, err, tc.want)
		}
	}
}

// TestHoldsFunc checks that HoldsFunc tells a file holding exactly what
// its write writes from one holding less, more or other bytes, and
// returns the errors of the file's opening and of the write.
func TestHoldsFunc(t *testing.T) {
	d := openDir(t, filepath.Join(t.TempDir(), "state"), 0)
	if _, err := d.WriteFile("f", []byte("hello\nworld\n")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		writes  []string
		err     error
		want    bool
		wantErr error
	}{
		{"same", []string{"hello\n", "world\n"}, nil, true, nil},
		{"less", []string{"hello\n"}, nil, false, nil},
		{"more", []string{"hello\n", "world\n", "!"}, nil, false, nil},
		{"other", []string{"hello\n", "there\n"}, nil, false, nil},
		{"nothing", nil, nil, false, nil},
		{"write fails", []string{"hello\n"}, boom, false, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.HoldsFunc("f", func(w io.Writer) error {
				for _, s := range tc.writes {
					if _, err := io.WriteString(w, s); err != nil {
						return err
					}
				}
				return tc.err
			})
			if got != tc.want || !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Errorf("HoldsFunc = %v, %v; want %v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := d.HoldsFunc("missing", func(io.Writer) error { return nil }); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("HoldsFunc of a missing file = %v, want fs.ErrNotExist", err)
	}
}

// TestWriteFileFuncPanicLeavesNoFile checks that a write that panics
// leaves neither a temporary file nor the final one, and lets the panic
// go on to its caller.
func TestWriteFileFuncPanicLeavesNoFile(t *testing.T) {
	d := openDir(t, filepath.Join(t.TempDir(), "state"), 0)
	func() {
		defer func() {
			if v := recover(); v != "encode" {
				t.Errorf("recovered %v; want the write's panic", v)
			}
		}()
		d.WriteFileFunc("x", func(w io.Writer) error {
			w.Write([]byte("half"))
			panic("encode")
		})
	}()
	des, err := d.ReadDir()
	if err != nil || len(des) != 0 {
		t.Errorf("after a panicking write the directory holds %v, %v; want nothing", des, err)
	}
}
