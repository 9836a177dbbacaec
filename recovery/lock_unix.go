//go:build unix

package recovery

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on f without waiting: ErrLocked if
// another open file holds it. The lock goes when f is closed, or when the
// process dies.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrLocked
	}
	return err
}
