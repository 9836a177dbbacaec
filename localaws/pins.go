package localaws

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// pins holds the package.json and lock file that pin the servers' npm
// packages, the same as at the repository's root, so that a program built
// from this package installs them outside a weir checkout.
//
//go:embed npm/package.json npm/package-lock.json
var pins embed.FS

// cacheDir returns the folder of the user's cache directory that holds the
// pinned package.json and lock file, writing them there if they are missing
// or differ. The folder is named after the lock file's hash, so a weir
// version with other pins installs beside, not over, another's.
func cacheDir() (string, error) {
	lock, err := pins.ReadFile("npm/package-lock.json")
	if err != nil {
		return "", fmt.Errorf("localaws: %w", err)
	}
	manifest, err := pins.ReadFile("npm/package.json")
	if err != nil {
		return "", fmt.Errorf("localaws: %w", err)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("localaws: no cache directory for the servers (%w): set Options.Dir or %s", err, EnvDir)
	}
	sum := sha256.Sum256(lock)
	dir := filepath.Join(base, "weir", "localaws", hex.EncodeToString(sum[:6]))
	if err := writePins(dir, manifest, lock); err != nil {
		return "", err
	}
	return dir, nil
}

// writePins writes package.json and package-lock.json into dir unless they
// are there already, each through a temporary file renamed into place, so
// that concurrent processes never see half a file.
func writePins(dir string, manifest, lock []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("localaws: %w", err)
	}
	for name, data := range map[string][]byte{"package.json": manifest, "package-lock.json": lock} {
		path := filepath.Join(dir, name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
			continue
		}
		tmp, err := os.CreateTemp(dir, name+".*")
		if err != nil {
			return fmt.Errorf("localaws: %w", err)
		}
		_, werr := tmp.Write(data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("localaws: writing %s: %w", path, err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("localaws: %w", err)
		}
	}
	return nil
}
