package localaws

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

const (
	// lockPollEvery is how often a waiting installer retries the install lock.
	lockPollEvery = 25 * time.Millisecond
	// lockHeartbeat is how often the holder of an exclusive-create lock
	// refreshes its file's modification time, so that waiters can tell a
	// live holder from one that died without removing the file.
	lockHeartbeat = 2 * time.Second
	// lockStaleAfter is how old an exclusive-create lock file must be before
	// a waiter deems its holder dead and removes it: several heartbeats, so a
	// busy machine that delays one heartbeat does not lose the lock.
	lockStaleAfter = 10 * lockHeartbeat
)

// pollLock calls try until it reports the lock taken, an error, or ctx ends.
// Polling a non-blocking attempt, rather than blocking in the kernel, lets a
// cancelled ctx end the wait. contended, if set, is called once, the first
// time the lock is found held by someone else.
func pollLock(ctx context.Context, path string, contended func(), try func() (bool, error)) error {
	var tick *time.Ticker
	for {
		ok, err := try()
		if err != nil {
			return fmt.Errorf("localaws: install lock %s: %w", path, err)
		}
		if ok {
			return nil
		}
		if tick == nil {
			tick = time.NewTicker(lockPollEvery)
			defer tick.Stop()
			if contended != nil {
				contended()
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localaws: waiting for install lock %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// lockExclusiveCreate is the portable install lock, used where flock(2) is
// missing (Windows). The lock is held by whoever creates path with O_EXCL;
// the holder removes it on unlock. Because a holder that dies cannot remove
// it, the holder refreshes the file's modification time every lockHeartbeat,
// and a waiter removes a file not refreshed for lockStaleAfter and tries
// again. Two waiters that both find the same stale file may, in a narrow
// window, both go on to take the lock; the cost would be two concurrent
// `npm ci` runs after a crashed one, which the re-check under the lock makes
// harmless in all but that rare case.
//
// The returned function stops the heartbeat and removes the file.
func lockExclusiveCreate(ctx context.Context, path string, contended func()) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("localaws: install lock: %w", err)
	}
	try := func() (bool, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, werr := f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
			return true, errors.Join(werr, f.Close())
		}
		if !errors.Is(err, fs.ErrExist) {
			return false, err
		}
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false, nil // released between the two calls: retry at the next tick
		case err != nil:
			return false, err
		case time.Since(info.ModTime()) > lockStaleAfter:
			// The holder stopped refreshing it: it died. Remove and retry.
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return false, err
			}
		}
		return false, nil
	}
	if err := pollLock(ctx, path, contended, try); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(lockHeartbeat)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				_ = os.Chtimes(path, now, now) // a missed beat is retried at the next one
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			wg.Wait()
			_ = os.Remove(path)
		})
	}, nil
}
