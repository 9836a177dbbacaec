package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBinaryRunsOutsideTheCheckout builds the example, copies the binary to
// a folder outside the module and runs it there against the local servers,
// as a user who copied the example into a module of their own would: with
// a home and cache directory of its own and no WEIR_* variable, so that it
// installs the servers from the pins built into package localaws into the
// user cache directory (with npm ci, which needs the npm registry; npm's
// cache is the caller's, so packages already downloaded are not fetched
// again). It must count every line it produced.
func TestBinaryRunsOutsideTheCheckout(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the example needs the go command in PATH: %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("the local servers need npm in PATH: %v", err)
	}
	npmCache, err := exec.Command(npm, "config", "get", "cache").Output()
	if err != nil {
		t.Fatalf("npm config get cache: %v", err)
	}

	bin := filepath.Join(t.TempDir(), "wordcount")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work, home := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "-duration", "2s", "-shards", "1", "-out", filepath.Join(work, "counts"))
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"LocalAppData=" + filepath.Join(home, "cache"), // Windows' user cache directory
		"TMPDIR=" + os.TempDir(),
		"npm_config_cache=" + strings.TrimSpace(string(npmCache)),
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("wordcount outside the checkout: %v\noutput:\n%s", err, out.String())
	}
	produced := lastInt(t, &out, `produced (\d+) lines`)
	if counted := lastInt(t, &out, `counted (\d+) lines`); produced == 0 || counted != produced {
		t.Errorf("produced %d lines, counted %d\noutput:\n%s", produced, counted, out.String())
	}
	installed, err := filepath.Glob(filepath.Join(home, "cache", "weir", "localaws", "*", "node_modules", "kinesalite"))
	if err != nil || len(installed) != 1 {
		t.Errorf("servers installed in the cache directory: %v, %v; want one kinesalite under %s", installed, err,
			filepath.Join(home, "cache", "weir", "localaws"))
	}
}
