package localaws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInstallLockGoroutines runs two installers on one lock file; the second
// finds the lock taken while the first installs, and must not install again.
func TestInstallLockGoroutines(t *testing.T) {
	t.Parallel()
	lock := filepath.Join(t.TempDir(), "sub", "install.lock")
	var done atomic.Bool
	var installs atomic.Int32
	check := func() (bool, error) { return done.Load(), nil }
	firstHolds := make(chan struct{})  // closed by the first installer, inside the lock
	secondWaits := make(chan struct{}) // closed when the second finds the lock taken

	first := installer{lockPath: lock, check: check, install: func(ctx context.Context) error {
		installs.Add(1)
		close(firstHolds)
		select { // keep the lock until the second installer waits for it
		case <-secondWaits:
		case <-ctx.Done():
			return ctx.Err()
		}
		done.Store(true)
		return nil
	}}
	second := installer{lockPath: lock, check: check, install: func(context.Context) error {
		installs.Add(1)
		done.Store(true)
		return nil
	}, contended: func() { close(secondWaits) }}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { errs[0] = first.run(t.Context()) })
	wg.Go(func() {
		<-firstHolds
		errs[1] = second.run(t.Context())
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := installs.Load(); got != 1 {
		t.Errorf("installs = %d, want 1", got)
	}
}

// TestInstallLockCancel checks that a waiter gives up when its ctx ends.
func TestInstallLockCancel(t *testing.T) {
	t.Parallel()
	lock := filepath.Join(t.TempDir(), "install.lock")
	unlock, err := lockFile(t.Context(), lock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithCancel(t.Context())
	_, err = lockFile(ctx, lock, cancel)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("lockFile with the lock taken and ctx cancelled: got %v, want context.Canceled", err)
	}
}

// TestInstallLockProcesses runs three processes that each install under the
// same lock unless a marker file exists; exactly one must install.
func TestInstallLockProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmds := make([]*exec.Cmd, 3)
	for i := range cmds {
		cmds[i] = exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperInstaller$")
		cmds[i].Env = append(os.Environ(), "LOCALAWS_HELPER_DIR="+dir)
	}
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"install"}, strings.Fields(string(log))); diff != "" {
		t.Errorf("installs logged (-want +got):\n%s", diff)
	}
}

// TestHelperInstaller is the body of TestInstallLockProcesses's processes.
func TestHelperInstaller(t *testing.T) {
	dir := os.Getenv("LOCALAWS_HELPER_DIR")
	if dir == "" {
		return // not a helper process
	}
	marker := filepath.Join(dir, "installed")
	in := installer{
		lockPath: filepath.Join(dir, "install.lock"),
		check: func() (bool, error) {
			_, err := os.Stat(marker)
			return err == nil, nil
		},
		install: func(context.Context) error {
			f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = f.WriteString("install\n")
			return errors.Join(err, f.Close(), os.WriteFile(marker, nil, 0o644))
		},
	}
	if err := in.run(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestInstalled checks the comparison of node_modules with the lock file:
// npm's hidden lockfile must list the lock's packages with the same
// versions and integrity, and each package folder must hold its version.
func TestInstalled(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// lock renders a lock file of entries "dir version integrity [optional]".
	lock := func(entries ...string) string {
		var b strings.Builder
		b.WriteString(`{"lockfileVersion":3,"packages":{"":{"name":"x"}`)
		for _, e := range entries {
			f := strings.Fields(e)
			fmt.Fprintf(&b, `,%q:{"version":%q,"integrity":%q,"optional":%v}`, f[0], f[1], f[2], len(f) > 3)
		}
		b.WriteString("}}")
		return b.String()
	}
	const (
		a     = "node_modules/a 1.0.0 sha512-aaa"
		b     = "node_modules/b 2.0.0 sha512-bbb"
		opt   = "node_modules/c 3.0.0 sha512-ccc optional"
		nestd = "node_modules/a/node_modules/d 4.0.0 sha512-ddd"
	)
	pinned := []string{a, b, opt, nestd}
	tests := []struct {
		name    string
		hidden  []string          // entries of node_modules/.package-lock.json; nil: no such file
		folders map[string]string // package folder -> version in its package.json
		want    bool
	}{
		{"as locked, optional skipped", []string{a, b, nestd},
			map[string]string{"node_modules/a": "1.0.0", "node_modules/b": "2.0.0", "node_modules/a/node_modules/d": "4.0.0"}, true},
		{"as locked, optional installed", []string{a, b, opt, nestd},
			map[string]string{"node_modules/a": "1.0.0", "node_modules/b": "2.0.0", "node_modules/c": "3.0.0", "node_modules/a/node_modules/d": "4.0.0"}, true},
		{"no hidden lockfile", nil,
			map[string]string{"node_modules/a": "1.0.0", "node_modules/b": "2.0.0", "node_modules/a/node_modules/d": "4.0.0"}, false},
		{"installed from another tarball", []string{a, "node_modules/b 2.0.0 sha512-evil", nestd},
			map[string]string{"node_modules/a": "1.0.0", "node_modules/b": "2.0.0", "node_modules/a/node_modules/d": "4.0.0"}, false},
		{"nested package missing", []string{a, b},
			map[string]string{"node_modules/a": "1.0.0", "node_modules/b": "2.0.0"}, false},
		{"folder at another version", []string{a, b, nestd},
			map[string]string{"node_modules/a": "1.0.0", "node_modules/b": "2.0.1", "node_modules/a/node_modules/d": "4.0.0"}, false},
		{"folder missing", []string{a, b, nestd},
			map[string]string{"node_modules/a": "1.0.0", "node_modules/a/node_modules/d": "4.0.0"}, false},
		{"extra package", []string{a, b, nestd, "node_modules/e 5.0.0 sha512-eee"},
			map[string]string{"node_modules/a": "1.0.0", "node_modules/b": "2.0.0", "node_modules/a/node_modules/d": "4.0.0", "node_modules/e": "5.0.0"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			write(t, filepath.Join(root, "package.json"), `{"dependencies":{"a":"1.0.0","b":"2.0.0"}}`)
			write(t, filepath.Join(root, "package-lock.json"), lock(pinned...))
			if tt.hidden != nil {
				write(t, filepath.Join(root, "node_modules", ".package-lock.json"), lock(tt.hidden...))
			}
			for dir, v := range tt.folders {
				write(t, filepath.Join(root, dir, "package.json"), `{"version":"`+v+`"}`)
			}
			got, err := installed(root)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("installed = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("lock entry without integrity", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		write(t, filepath.Join(root, "package-lock.json"), `{"lockfileVersion":3,"packages":{"node_modules/a":{"version":"1.0.0"}}}`)
		if _, err := installed(root); err == nil || !strings.Contains(err.Error(), "no integrity") {
			t.Errorf("installed: got %v, want an error saying node_modules/a has no integrity", err)
		}
	})
}

// TestFindRoot checks the upward search and the EnvDir override.
func TestFindRoot(t *testing.T) {
	t.Parallel()
	want, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := findRoot(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("findRoot from the package folder = %q, want %q", got, want)
	}
	got, err = findRoot(func(k string) string { return map[string]string{EnvDir: ".."}[k] })
	if err != nil || got != want {
		t.Errorf("findRoot with %s=.. = %q, %v; want %q", EnvDir, got, err, want)
	}
	if _, err := findRoot(func(k string) string { return map[string]string{EnvDir: t.TempDir()}[k] }); err == nil {
		t.Errorf("findRoot with %s naming a folder without package.json: got no error", EnvDir)
	}
}

// TestFindRootOutsideACheckout checks that, outside a weir checkout and
// without EnvDir, the servers go into the user's cache directory, with the
// pinned package.json and lock file written there: a program built from
// this package runs anywhere.
func TestFindRootOutsideACheckout(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // Linux and other Unix
	t.Setenv("HOME", cache)           // macOS: HOME/Library/Caches
	t.Setenv("LocalAppData", cache)   // Windows
	t.Chdir(t.TempDir())
	got, err := findRoot(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(cache, got); err != nil || !strings.HasPrefix(rel, filepath.Join("weir", "localaws")+string(filepath.Separator)) {
		t.Errorf("findRoot outside a checkout = %q, want a folder under %s", got, filepath.Join(cache, "weir", "localaws"))
	}
	for _, name := range []string{"package.json", "package-lock.json"} {
		want, err := pins.ReadFile("npm/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if have, err := os.ReadFile(filepath.Join(got, name)); err != nil || !bytes.Equal(have, want) {
			t.Errorf("%s in %s: %v; want the pinned one", name, got, err)
		}
	}
}
