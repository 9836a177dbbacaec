// Package dirlock keeps a directory to one owner at a time, across
// processes: an exclusive flock(2) on a file in it, held while the owner
// runs and dropped by the kernel when the owner closes it or dies. The
// recovery log's directory, the file sink's and the lease table's state
// directory (where a restarted worker proves its predecessor dead) use it.
package dirlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
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
	return AcquireWait(context.Background(), dir, name, clock.Real{}, 0, nil)
}

// AcquireWait is Acquire, waiting as FileWait does, up to d on clk, for
// another owner to release the lock.
func AcquireWait(ctx context.Context, dir *durable.Dir, name string, clk clock.Clock, d time.Duration, waiting func()) (*Lock, error) {
	path := dir.Join(name)
	f, err := dir.Open(name, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("dirlock: open %s: %w", path, err)
	}
	if err := FileWait(ctx, f, clk, d, waiting); err != nil {
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

// FileWait is File, but when another owner holds the lock it waits up to d
// on clk for it to be released, as a predecessor that is exiting releases it
// when it dies: it calls waiting, if not nil, once, then tries again with
// back-off, and returns ErrLocked if the lock is still held after d, or
// ctx's error if ctx ends first. d <= 0 does not wait.
func FileWait(ctx context.Context, f *os.File, clk clock.Clock, d time.Duration, waiting func()) error {
	err := File(f)
	if !errors.Is(err, ErrLocked) || d <= 0 {
		return err
	}
	if waiting != nil {
		waiting()
	}
	deadline := clk.Now().Add(d)
	wait := pollWait.Start()
	for {
		left := deadline.Sub(clk.Now())
		if left <= 0 {
			return ErrLocked
		}
		if err := clock.Sleep(ctx, clk, min(wait.Next(), left)); err != nil {
			return err
		}
		if err := File(f); !errors.Is(err, ErrLocked) {
			return err
		}
	}
}

// pollWait paces FileWait's tries: soon at first, as a process exiting
// usually does so within milliseconds, then at most every half second.
var pollWait = backoff.Policy{Base: 20 * time.Millisecond, Max: 500 * time.Millisecond}
