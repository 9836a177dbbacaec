// Package flock takes exclusive advisory locks on local files: held while
// the file stays open, released by the kernel when the process dies, so
// holding one proves that no earlier holder still runs.
package flock

import (
	"errors"
	"fmt"
	"os"
)

// ErrLocked is returned by Lock when another open file holds the lock.
var ErrLocked = errors.New("flock: locked by another holder")

// Lock opens (creating it if needed) and locks path without waiting. The
// lock is held until the returned file is closed, or the process dies. It
// returns an error wrapping ErrLocked if another open file holds it, in
// this process or another.
func Lock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("flock: %w", err)
	}
	if err := lock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock: %s: %w", path, err)
	}
	return f, nil
}
