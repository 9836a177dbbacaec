package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/weirstream/weir/batch"
)

// Names of a directory log's snapshot files: snapshot-<time>.snap, the time
// in milliseconds, zero-padded to 20 digits so that names sort by time,
// written through a temporary file (snapshot.tmp in earlier versions).
const (
	snapPrefix = "snapshot-"
	snapSuffix = ".snap"
	snapTemp   = "snapshot.tmp"
)

func snapshotName(t batch.Time) string {
	return fmt.Sprintf("%s%020d%s", snapPrefix, int64(t), snapSuffix)
}

// parseSnapshotName returns the time of a snapshot file's name.
func parseSnapshotName(name string) (batch.Time, bool) {
	num, ok := strings.CutPrefix(name, snapPrefix)
	if !ok {
		return 0, false
	}
	if num, ok = strings.CutSuffix(num, snapSuffix); !ok || len(num) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, false
	}
	return batch.Time(n), true
}

// PutSnapshot writes the snapshot to a temporary file, fsyncs it, renames
// it to snapshot-<t>.snap and fsyncs the directory: a crash leaves either no
// file for t (a torn temporary file, removed at the next open) or the whole
// snapshot. The reference is the file's name. See SnapshotStore.
//
// A failed PutSnapshot does not break the log: the snapshot is not
// referenced by any entry yet, so the previous one stays current.
//
// The file is written without l.mu, so that appends (a block, a batch) do
// not wait for the write of a large state: its name is read by nothing
// before the driver appends an entry naming it, after PutSnapshot has
// returned, and segments are listed by their own names. l.snapMu keeps
// the snapshot calls from running into one another, and Close from
// closing the directory under the write.
func (l *dirLog) PutSnapshot(ctx context.Context, t batch.Time, data []byte) (string, error) {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	err := usable(ctx, l.closed, l.broken)
	l.mu.Unlock()
	if err != nil {
		return "", err
	}
	if l.snapHook != nil {
		l.snapHook()
	}
	name := snapshotName(t)
	if _, err := l.d.WriteFile(name, data); err != nil {
		return "", fmt.Errorf("recovery: write snapshot %s: %w", name, err)
	}
	return name, nil
}

// GetSnapshot reads the snapshot file ref names; see
// SnapshotStore.
func (l *dirLog) GetSnapshot(ctx context.Context, ref string) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := usable(ctx, l.closed, l.broken); err != nil {
		return nil, err
	}
	_, ok := parseSnapshotName(ref)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not the name of a snapshot file", ErrNoSnapshot, ref)
	}
	path := l.d.Join(ref)
	b, err := l.d.ReadFile(ref)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoSnapshot, path)
	}
	if err != nil {
		return nil, fmt.Errorf("recovery: read snapshot: %w", err)
	}
	return b, nil
}

// PruneSnapshots removes the snapshot files older than t but ref's; see
// SnapshotStore. A file it cannot remove is logged and left for the next
// call.
func (l *dirLog) PruneSnapshots(ctx context.Context, t batch.Time, ref string) error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := usable(ctx, l.closed, l.broken); err != nil {
		return err
	}
	des, err := l.d.ReadDir()
	if err != nil {
		return fmt.Errorf("recovery: list old snapshots to remove: %w", err)
	}
	removed := false
	for _, de := range des {
		if st, ok := parseSnapshotName(de.Name()); ok && st < t && de.Name() != ref {
			if err := l.d.Remove(de.Name()); err != nil {
				l.logger.Warn("recovery: could not remove an old snapshot", "file", de.Name(), "err", err)
				continue
			}
			removed = true
		}
	}
	if removed {
		if err := l.d.Sync(); err != nil {
			return fmt.Errorf("recovery: sync the log directory after removing old snapshots: %w", err)
		}
	}
	return nil
}
