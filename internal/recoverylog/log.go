package recoverylog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
)

// Log is the driver's view of a recovery.Log: it appends and reads entries,
// encoding and decoding them, compacts the log (Read, Recover, then
// Replace with State.Entries), frames and checks snapshots, and removes
// the snapshots a compaction leaves unreferenced. It is safe for concurrent
// use; a Compact waits for the appends under way and holds back new ones.
type Log struct {
	store  recovery.Log
	snaps  recovery.SnapshotStore // nil if store keeps no snapshots
	logger *slog.Logger

	mu sync.RWMutex // held for reading by Append, for writing by Compact
}

// Open opens o's log and wraps it; see Wrap.
func Open(ctx context.Context, o recovery.Opener, logger *slog.Logger) (*Log, error) {
	l, err := o.Open(ctx)
	if err != nil {
		return nil, err
	}
	return Wrap(l, logger), nil
}

// Wrap returns the driver's view of store, logging to logger (nil means
// slog.Default()) what only tidies up and failed.
func Wrap(store recovery.Log, logger *slog.Logger) *Log {
	if logger == nil {
		logger = slog.Default()
	}
	snaps, _ := store.(recovery.SnapshotStore)
	return &Log{store: store, snaps: snaps, logger: logger}
}

// Store returns the wrapped recovery.Log.
func (l *Log) Store() recovery.Log { return l.store }

// Append encodes entries and appends them; see recovery.Log.Append. Every
// entry must Validate, or nothing is appended (an error wrapping
// ErrInvalidEntry).
func (l *Log) Append(ctx context.Context, entries ...Entry) error {
	enc, err := EncodeEntries(entries)
	if err != nil {
		return err
	}
	if len(enc) == 0 {
		return l.store.Append(ctx) // reports a closed log
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.store.Append(ctx, enc...)
}

// Read returns the log's entries in append order; a record that does not
// decode is a *recovery.CorruptError.
func (l *Log) Read(ctx context.Context) ([]Entry, error) {
	recs, err := l.store.Read(ctx)
	if err != nil {
		return nil, err
	}
	return DecodeEntries(recs)
}

// Compact replaces the log's entries with the shortest log that recovers to
// the same State (State.Entries): it drops completed batches and the blocks
// only they referenced, and keeps the shape, the pending batches with their
// blocks, the unallocated blocks, the batches to replay after the current
// snapshot and the progress (last completed batch, next block Seq per
// source, greatest sequence number per shard not finished). It fails,
// changing nothing, on a log that Recover refuses. It then removes the
// snapshots older than the current one.
func (l *Log) Compact(ctx context.Context) error { return l.compact(ctx, func(*State) {}) }

// CompactReleasing compacts the log as Compact does, giving back the batch
// times reserved (BatchesReserved, EmptyRun) after t: for a driver that
// stops having cut its last batch at t, whose reservation no batch will
// use, so that its restart's batches start at the clock rather than after
// them. If completed is not 0, it records too that every batch up to it
// completed: the driver's last completed batch, an empty batch of a run
// (EmptyRun) whose completion no entry records, which a restart would
// otherwise run again.
func (l *Log) CompactReleasing(ctx context.Context, t, completed batch.Time) error {
	return l.compact(ctx, func(st *State) {
		st.completeThrough(completed)
		st.release(t)
	})
}

// compact replaces the log's entries with those of the state it recovers
// to, changed by change.
func (l *Log) compact(ctx context.Context, change func(*State)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	entries, err := l.Read(ctx)
	if err != nil {
		return err
	}
	st, err := Recover(entries)
	if err != nil {
		return fmt.Errorf("recovery: compact: %w", err)
	}
	change(st)
	enc, err := EncodeEntries(st.Entries())
	if err != nil {
		return err
	}
	if err := l.store.Replace(ctx, enc); err != nil {
		return err
	}
	if l.snaps != nil && st.Snapshot != nil {
		if err := l.snaps.PruneSnapshots(ctx, st.Snapshot.Time, st.Snapshot.Ref); err != nil && ctx.Err() == nil {
			l.logger.Warn("recovery: could not remove old snapshots; the next compaction will retry", "err", err)
		}
	}
	return nil
}

// Close closes the log; see recovery.Log.Close.
func (l *Log) Close() error { return l.store.Close() }

// KeepsSnapshots reports whether the log keeps state snapshots
// (recovery.SnapshotStore).
func (l *Log) KeepsSnapshots() bool { return l.snaps != nil }

// errNoSnapshots is the error of the snapshot calls of a log that keeps
// none.
var errNoSnapshots = errors.New("recovery: the log keeps no state snapshots (recovery.SnapshotStore)")

// PutSnapshot frames data (its time, length and checksum) and stores it as
// the snapshot after the batch at t; see recovery.SnapshotStore.
func (l *Log) PutSnapshot(ctx context.Context, t batch.Time, data []byte) (string, error) {
	if l.snaps == nil {
		return "", errNoSnapshots
	}
	return l.snaps.PutSnapshot(ctx, t, frameSnapshot(t, data))
}

// GetSnapshot returns the data of the snapshot ref names, checked: a
// damaged snapshot, or one of another time than ref's, is a
// *recovery.CorruptError naming ref.
func (l *Log) GetSnapshot(ctx context.Context, ref SnapshotRef) ([]byte, error) {
	if l.snaps == nil {
		return nil, errNoSnapshots
	}
	b, err := l.snaps.GetSnapshot(ctx, ref.Ref)
	if err != nil {
		return nil, err
	}
	t, data, err := unframeSnapshot(b)
	if err == nil && t != ref.Time {
		err = fmt.Errorf("it holds the snapshot at %v, the log's entry says %v", t, ref.Time)
	}
	if err != nil {
		return nil, &recovery.CorruptError{Path: "snapshot " + ref.Ref, Err: err}
	}
	return data, nil
}
