// Package dirlock keeps a directory to one owner at a time, across
// processes: an exclusive flock(2) on a file in it, held while the owner
// runs and dropped by the kernel when the owner closes it or dies. The
// recovery log's directory, the file sink's and the lease table's state
// directory (where a restarted worker proves its predecessor dead) use it.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/weirstream/weir/internal/durable"
)

// ErrLocked is returned by Acquire and File when another owner, in this
// process or another, holds the lock.
var ErrLocked = errors.New("dirlock: held by another owner")

// ErrUnsupported is returned by Acquire and File on a platform without
// flock(2).
var ErrUnsupported = errors.New("dirlock: locking a directory needs flock(2), which this platform lacks")

// Lock is a held directory lock. Release drops it.
type Lock struct {
	once sync.Once
	f    *os.File
	err  error
}

// Acquire creates the file name in dir if needed (refusing a symbolic link
// or another non-regular file there, see durable.Dir.Open) and takes its
// lock without waiting: an error wrapping ErrLocked when another owner
// holds it.
func Acquire(dir *durable.Dir, name string) (*Lock, error) {
	path := dir.Join(name)
	f, err := dir.Open(name, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("dirlock: open %s: %w", path, err)
	}
	if err := File(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock. It is idempotent; it returns the error of
// closing the lock file.
func (l *Lock) Release() error {
	l.once.Do(func() { l.err = l.f.Close() })
	return l.err
}
