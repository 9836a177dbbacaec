//go:build unix

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// File takes an exclusive flock(2) on f without waiting: ErrLocked if
// another open file holds it. The lock goes when f is closed, or when the
// process dies.
func File(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
