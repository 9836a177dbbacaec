package leasetable

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/weirstream/weir/internal/durable"

	"github.com/weirstream/weir/internal/dirlock"
)

// workerState is this worker's file in Config.StateDir: the worker IDs
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
type workerState struct {
	lock *dirlock.Lock
	path string // the workers file
	me   string
}

// openWorkerState locks dir's lock file for table and returns the state
// with the IDs of the earlier workers (never me), after writing me first
// in the list, so that a successor of this worker learns of it before it
// takes any lease.
func openWorkerState(dir, table, me string) (*workerState, []string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("leasetable: state directory: %w", err)
	}
	lock, err := dirlock.Acquire(dir, table+".lock")
	if err != nil {
		return nil, nil, fmt.Errorf("leasetable: state directory %s: %w", dir, err)
	}
	s := &workerState{lock: lock, path: filepath.Join(dir, table+".workers"), me: me}
	b, err := os.ReadFile(s.path)
	if err != nil && !os.IsNotExist(err) {
		lock.Release()
		return nil, nil, fmt.Errorf("leasetable: state directory: %w", err)
	}
	var preds []string
	for _, line := range strings.Split(string(b), "\n") {
		if id := strings.TrimSpace(line); id != "" && id != me && !slices.Contains(preds, id) {
			preds = append(preds, id)
		}
	}
	if err := s.write(preds); err != nil {
		lock.Release()
		return nil, nil, err
	}
	return s, preds, nil
}

// write replaces the list with me followed by preds, durably.
func (s *workerState) write(preds []string) error {
	var buf bytes.Buffer
	for _, id := range append([]string{s.me}, preds...) {
		buf.WriteString(id)
		buf.WriteByte('\n')
	}
	tmp := s.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("leasetable: state directory: %w", err)
	}
	_, err = f.Write(buf.Bytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err == nil {
		err = durable.SyncDir(filepath.Dir(s.path))
	}
	if err != nil {
		return fmt.Errorf("leasetable: writing %s: %w", s.path, err)
	}
	return nil
}

// close releases the lock.
func (s *workerState) close() error { return s.lock.Release() }

// openState opens StateDir, if set, and records the earlier workers listed
// there as gone; nil if there is no state to keep. A state directory that
// cannot be used is logged, and the worker does without it: its
// predecessors' leases are then taken when they expire.
func (c *Coordinator) openState() *workerState {
	if c.cfg.StateDir == "" {
		return nil
	}
	st, preds, err := openWorkerState(c.cfg.StateDir, c.table.Name(), c.cfg.WorkerID)
	if err != nil {
		c.log.Warn("leasetable: state directory unusable; the leases of an earlier worker will be taken when they expire", "err", err)
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
