package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/dirlock"
	"github.com/weirstream/weir/internal/durable"
)

// workerState is this worker's file in leasetable.Config.StateDir: the worker IDs
// that ran on the directory before, none of which runs any more, since
// each held the directory's lock for the table while its Coordinator ran
// and this one holds it now.
//
// Two files per table: "<table>.lock", locked with flock(2) for as long as
// the Coordinator runs, and "<table>.workers", one worker ID per line, this
// one first, replaced whole (a temporary file renamed over it, both
// fsynced) so a crash leaves the old list or the new one. The lock is on a
// file that is never replaced: a rename would move a later holder onto
// another inode than an earlier one still locks.
//
// The list is trusted (its workers' leases are taken at once), so the
// directory must be one only this user can write (durable.OpenDir), and
// neither file may be a symbolic link.
type workerState struct {
	dir  *durable.Dir
	lock *dirlock.Lock
	name string // the workers file
	me   string
}

// openWorkerState locks dir's lock file for table and returns the state
// with the IDs of the earlier workers (never me), after writing me first
// in the list, so that a successor of this worker learns of it before it
// takes any lease. Its files get permission perm (0 means 0600).
func openWorkerState(dir string, perm fs.FileMode, table, me string) (*workerState, []string, error) {
	return openWorkerStateWait(context.Background(), dir, perm, table, me, clock.Real{}, 0, nil)
}

// openWorkerStateWait is openWorkerState, waiting up to wait on clk (as
// dirlock.FileWait does, calling waiting once) for another worker that
// holds the lock to release it.
func openWorkerStateWait(ctx context.Context, dir string, perm fs.FileMode, table, me string,
	clk clock.Clock, wait time.Duration, waiting func()) (_ *workerState, _ []string, err error) {
	d, err := durable.OpenDir(dir, perm)
	if err != nil {
		return nil, nil, fmt.Errorf("leasetable: state directory: %w", err)
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	lock, err := dirlock.AcquireWait(ctx, d, table+".lock", clk, wait, waiting)
	if err != nil {
		return nil, nil, fmt.Errorf("leasetable: state directory %s: %w", dir, err)
	}
	s := &workerState{dir: d, lock: lock, name: table + ".workers", me: me}
	preds, err := s.read()
	if err == nil {
		err = s.write(preds)
	}
	if err != nil {
		lock.Release()
		return nil, nil, err
	}
	return s, preds, nil
}

// read returns the workers listed, but me, and removes the temporary files
// of the list a crash left (".<table>.workers.tmp" in earlier versions).
func (s *workerState) read() ([]string, error) {
	des, err := s.dir.ReadDir()
	if err != nil {
		return nil, fmt.Errorf("leasetable: state directory: %w", err)
	}
	for _, de := range des {
		if final, ok := durable.TempOf(de.Name()); ok && final == s.name || de.Name() == s.name+".tmp" {
			if err := s.dir.Remove(de.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("leasetable: state directory: %w", err)
			}
		}
	}
	b, err := s.dir.ReadFile(s.name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("leasetable: state directory: %w", err)
	}
	var preds []string
	for _, line := range strings.Split(string(b), "\n") {
		if id := strings.TrimSpace(line); id != "" && id != s.me && !slices.Contains(preds, id) {
			preds = append(preds, id)
		}
	}
	return preds, nil
}

// write replaces the list with me followed by preds, durably.
func (s *workerState) write(preds []string) error {
	var buf bytes.Buffer
	for _, id := range append([]string{s.me}, preds...) {
		buf.WriteString(id)
		buf.WriteByte('\n')
	}
	if _, err := s.dir.WriteFile(s.name, buf.Bytes()); err != nil {
		return fmt.Errorf("leasetable: writing %s: %w", s.dir.Join(s.name), err)
	}
	return nil
}

// close releases the lock.
func (s *workerState) close() error { return errors.Join(s.lock.Release(), s.dir.Close()) }

// openState opens StateDir, if set, and records the earlier workers listed
// there as gone; nil if there is no state to keep. When another worker
// holds the directory, as a predecessor that is still exiting does, it
// waits for it (logged) up to LeaseDuration, after which that worker's
// leases expire anyway. A state directory that cannot be used then is
// logged, and the worker does without it: its predecessors' leases are
// then taken when they expire.
func (c *Coordinator) openState(ctx context.Context) *workerState {
	if c.cfg.StateDir == "" {
		return nil
	}
	wait := c.cfg.LeaseDuration
	st, preds, err := openWorkerStateWait(ctx, c.cfg.StateDir, c.cfg.StatePerm, c.table.Name(), c.cfg.WorkerID, c.cfg.Clock, wait, func() {
		c.log.Warn("leasetable: the state directory is locked by another worker; waiting for it to exit", "dir", c.cfg.StateDir, "wait", wait)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // Run is stopping: nothing to warn of
		}
		c.log.Warn("leasetable: state directory unusable; the leases of an earlier worker will be taken when they expire", "err", err,
			"fix", "give each worker a Leases.StateDir of its own, on a local file system, that this user can create and write and no one else can write")
		return nil
	}
	c.mu.Lock()
	c.state = st
	for _, id := range preds {
		c.dead[id] = true
	}
	c.mu.Unlock()
	if len(preds) > 0 {
		c.log.Info("leasetable: earlier workers of the state directory are gone; taking their leases back at once", "gone", preds)
	}
	return st
}

// forgetDeadLocked stops tracking the gone workers that own no lease any
// more, and rewrites the state file without them. c.mu must be held.
func (c *Coordinator) forgetDeadLocked(leases []Lease) {
	if len(c.dead) == 0 || c.state == nil {
		return
	}
	owning := make(map[string]bool)
	for _, l := range leases {
		if c.dead[l.Owner] {
			owning[l.Owner] = true
		}
	}
	if len(owning) == len(c.dead) {
		return
	}
	c.dead = owning
	preds := slices.Sorted(maps.Keys(owning))
	if err := c.state.write(preds); err != nil {
		c.log.Warn("leasetable: rewriting the state file failed; it lists workers that own nothing", "err", err)
	}
}
