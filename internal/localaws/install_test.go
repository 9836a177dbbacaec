package localaws

import (
	"context"
	"errors"
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

// TestInstalled checks the version comparison against package.json pins.
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
	tests := []struct {
		name      string
		installed map[string]string // package -> version in node_modules
		want      bool
	}{
		{"all pinned versions", map[string]string{"a": "1.0.0", "b": "2.0.0"}, true},
		{"one missing", map[string]string{"a": "1.0.0"}, false},
		{"one at another version", map[string]string{"a": "1.0.0", "b": "2.0.1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			write(t, filepath.Join(root, "package.json"), `{"dependencies":{"a":"1.0.0","b":"2.0.0"}}`)
			for pkg, v := range tt.installed {
				write(t, filepath.Join(root, "node_modules", pkg, "package.json"), `{"version":"`+v+`"}`)
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
}

// TestFindRoot checks the upward search and the EnvDir override.
func TestFindRoot(t *testing.T) {
	t.Parallel()
	want, err := filepath.Abs("../..")
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
	got, err = findRoot(func(k string) string { return map[string]string{EnvDir: "../.."}[k] })
	if err != nil || got != want {
		t.Errorf("findRoot with %s=../.. = %q, %v; want %q", EnvDir, got, err, want)
	}
	if _, err := findRoot(func(k string) string { return map[string]string{EnvDir: t.TempDir()}[k] }); err == nil {
		t.Errorf("findRoot with %s naming a folder without package.json: got no error", EnvDir)
	}
}
