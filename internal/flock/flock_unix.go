//go:build unix

package flock

import (
	"errors"
	"os"
	"syscall"
)

// lock takes an exclusive flock(2) on f without waiting.
func lock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
