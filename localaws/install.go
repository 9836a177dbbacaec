package localaws

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const (
	// modulePath identifies the weir checkout whose package.json pins the servers.
	modulePath = "github.com/weirstream/weir"
	// installHelp tells a user without Node how to get it.
	installHelp = "the local AWS servers need Node.js 20 or newer with npm " +
		"(https://nodejs.org/en/download, or e.g. `apt-get install nodejs npm`); " +
		"alternatively point " + EnvKinesisEndpoint + " and " + EnvDynamoDBEndpoint +
		" at loopback servers you started yourself"
)

// findRoot returns the folder holding package.json and node_modules: the value
// of EnvDir when set, else the nearest folder at or above the working
// directory that holds weir's go.mod and a package.json (a weir checkout,
// whose tests install the servers there), else a folder of the user's cache
// directory holding the embedded pins (cacheDir), so that a program built
// from this package runs anywhere.
func findRoot(getenv func(string) string) (string, error) {
	if dir := getenv(EnvDir); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("localaws: %s=%q: %w", EnvDir, dir, err)
		}
		if _, err := os.Stat(filepath.Join(abs, "package.json")); err != nil {
			return "", fmt.Errorf("localaws: %s=%q: no package.json there: %w", EnvDir, dir, err)
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("localaws: working directory: %w", err)
	}
	for dir := wd; ; {
		if isRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return cacheDir()
		}
		dir = parent
	}
}

// isRoot reports whether dir holds weir's go.mod and a package.json.
func isRoot(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		return false
	}
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == modulePath
		}
	}
	return false
}

// lookNode returns the path of the node binary, or an ErrNodeMissing error.
func lookNode(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found in PATH: %s", ErrNodeMissing, name, installHelp)
	}
	return path, nil
}

// lockEntry is one package of a package-lock.json (lockfileVersion 2 or 3)
// or of the hidden lockfile npm writes into node_modules.
type lockEntry struct {
	Version   string `json:"version"`
	Integrity string `json:"integrity"`
	Optional  bool   `json:"optional"`
}

// readLock returns the packages of the lock file at path, by their folder
// ("node_modules/a", "node_modules/a/node_modules/b"), without the root.
func readLock(path string) (map[string]lockEntry, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lock struct {
		LockfileVersion int                  `json:"lockfileVersion"`
		Packages        map[string]lockEntry `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if lock.LockfileVersion < 2 {
		return nil, fmt.Errorf("%s: lockfileVersion %d: want 2 or 3 (npm 7 or newer)", path, lock.LockfileVersion)
	}
	delete(lock.Packages, "")
	return lock.Packages, nil
}

// installed reports whether node_modules under root is the tree `npm ci`
// installs from root/package-lock.json: npm's record of what it installed
// (node_modules/.package-lock.json, the hidden lockfile) lists exactly the
// lock's packages, each at its version and with its integrity (the sha512
// of the tarball npm checked when it unpacked it), and each package's
// folder holds that version. A skipped optional package may be missing.
//
// This catches a tree npm did not install from this lock: another lock, a
// partial or interrupted install, a package added or swapped by hand with
// npm install. It cannot catch files edited in node_modules after the
// install (npm keeps no hash of unpacked files, and whoever can edit them
// can edit the hidden lockfile too): node_modules is trusted like the
// checkout itself. Deleting node_modules makes the next Start run npm ci,
// which checks every tarball against the lock again.
func installed(root string) (bool, error) {
	want, err := readLock(filepath.Join(root, "package-lock.json"))
	if err != nil {
		return false, fmt.Errorf("localaws: %w", err)
	}
	for dir, w := range want {
		if w.Integrity == "" {
			return false, fmt.Errorf("localaws: %s in %s has no integrity, so npm ci cannot check it: "+
				"pin it to a registry version and regenerate the lock with npm install", dir, filepath.Join(root, "package-lock.json"))
		}
	}
	modules := filepath.Join(root, "node_modules")
	have, err := readLock(filepath.Join(modules, ".package-lock.json"))
	if err != nil {
		return false, nil // not installed by npm 7+, or not at all
	}
	for dir, w := range want {
		h, ok := have[dir]
		if !ok && w.Optional {
			continue
		}
		if !ok || h.Version != w.Version || h.Integrity != w.Integrity {
			return false, nil
		}
		var pkg struct {
			Version string `json:"version"`
		}
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), "package.json"))
		if err != nil || json.Unmarshal(raw, &pkg) != nil || pkg.Version != w.Version {
			return false, nil
		}
	}
	for dir := range have {
		if _, ok := want[dir]; !ok {
			return false, nil
		}
	}
	return true, nil
}

// ensureInstalled runs `npm ci` in root unless node_modules already holds
// the tree of the lock file (installed). Concurrent callers, in this process or others, serialize on
// a lock file: one installs, the others wait and then find the packages.
func ensureInstalled(ctx context.Context, root string, logger *slog.Logger) error {
	check := func() (bool, error) { return installed(root) }
	if ok, err := check(); err != nil || ok {
		return err
	}
	npm, err := lookNode("npm")
	if err != nil {
		return err
	}
	in := installer{
		lockPath: filepath.Join(root, ".localaws", "install.lock"),
		check:    check,
		install: func(ctx context.Context) error {
			return npmCI(ctx, npm, root, logger)
		},
	}
	return in.run(ctx)
}

// npmCI runs `npm ci` in root and returns its output on failure. npm
// checks every tarball against the lock file's integrity (sha512). No
// install script runs (--ignore-scripts): the only ones in the tree are the
// LevelDB modules' node-gyp-build, and those modules ship prebuilt binaries
// for Linux, macOS and Windows that load without it. npm sees an
// allow-listed environment (childEnv), not the caller's AWS credentials.
func npmCI(ctx context.Context, npm, root string, logger *slog.Logger) error {
	logger.Info("localaws: installing the local AWS servers with npm ci", "dir", root)
	began := time.Now()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = root
	cmd.Env = childEnv(os.Environ(), true)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// The kill was ours: say why rather than "signal: killed".
			return fmt.Errorf("localaws: npm ci in %s interrupted after %v (it was still installing): %w", root, time.Since(began).Round(time.Millisecond), context.Cause(ctx))
		}
		return fmt.Errorf("localaws: npm ci in %s: %w; output:\n%s", root, err, bytes.TrimSpace(out.Bytes()))
	}
	logger.Info("localaws: npm ci done", "took", time.Since(began))
	return nil
}

// installer runs install at most once across every process that shares
// lockPath: under an exclusive file lock (lockFile) it checks, then installs
// if needed.
type installer struct {
	lockPath string
	check    func() (bool, error)
	install  func(ctx context.Context) error
	// contended, if set, is called once when the lock is first found taken.
	contended func()
}

// run takes the lock, re-checks, installs if still needed, and unlocks.
func (in installer) run(ctx context.Context) error {
	unlock, err := lockFile(ctx, in.lockPath, in.contended)
	if err != nil {
		return err
	}
	defer unlock()
	ok, err := in.check()
	if err != nil || ok {
		return err
	}
	if err := in.install(ctx); err != nil {
		return err
	}
	if ok, err := in.check(); err != nil || !ok {
		return errors.Join(errors.New("localaws: packages still missing after install"), err)
	}
	return nil
}
