package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirstream/weir/batch"
)

// Errors of a log, to branch on with errors.Is.
var (
	// ErrClosed is returned by calls on a Log after Close.
	ErrClosed = errors.New("recovery: log closed")
	// ErrLocked is returned by Open when another writer holds the log: a
	// directory locked by another process (or another open log in this
	// one).
	ErrLocked = errors.New("recovery: log is in use by another writer")
	// ErrFenced is returned by the writes of a DynamoDB log that another
	// writer has opened since: this writer must stop.
	ErrFenced = errors.New("recovery: log taken over by another writer")
	// ErrEntryTooLarge is returned by Append and Replace for a record
	// longer than the log stores in one piece; nothing is written.
	ErrEntryTooLarge = errors.New("recovery: entry too large")
	// ErrInvalidConfig is wrapped by the error of opening a log with a bad
	// configuration; the message names every bad field and its fix.
	ErrInvalidConfig = errors.New("recovery: invalid config")
	// ErrCorrupt is matched (errors.Is) by every *CorruptError.
	ErrCorrupt = errors.New("recovery: corrupt log")
	// ErrInconsistent is wrapped by the error of a restart whose log holds
	// entries that contradict each other: a batch referencing a block
	// never stored, a batch completed but never allocated, a block stored
	// twice differently. The message names the entry and, as a
	// CorruptError's, the fix.
	ErrInconsistent = errors.New("recovery: inconsistent log")
	// ErrNoSnapshot is wrapped by the error GetSnapshot returns for a
	// reference the store does not hold.
	ErrNoSnapshot = errors.New("recovery: no such snapshot")
)

// Log stores a pipeline's recovery log: a list of records in the order they
// were appended. The driver encodes each record (an entry recording a
// block, a batch, a snapshot...), decodes what Read returns and computes the
// compacted list that Replace stores: a Log only keeps the records, and
// never looks inside them. A record is never empty, and is UTF-8 text (the
// driver's entries are lines of JSON), which a Log may store as text.
//
// Implementations are safe for concurrent use: concurrent appends are
// serialised, each Append's records staying together, in one order that
// Read returns. The driver does not call Replace concurrently with Append.
// The conformance suite in package recoverytest checks an implementation.
type Log interface {
	// Append adds records at the end of the log, in order, and returns once
	// they are durable: any later Read, after a crash or on another machine
	// for a shared log, returns them. A record longer than the log stores
	// is refused with an error wrapping ErrEntryTooLarge, and nothing is
	// appended. If Append fails otherwise, a prefix of records (possibly
	// none, possibly all) may have been appended; the driver treats the
	// failure as fatal to this writer and recovers from the log after a
	// restart.
	Append(ctx context.Context, records ...[]byte) error
	// Read returns every record of the log in append order; the caller may
	// modify them.
	Read(ctx context.Context) ([][]byte, error)
	// Replace replaces every record of the log with records, durably: the
	// driver compacts the log with it. A crash during Replace leaves the
	// old records, the new ones, or the old ones followed by a prefix of
	// the new ones (the driver recovers the same state from each).
	Replace(ctx context.Context, records [][]byte) error
	// Close releases the log (its lock, files, handles). Later calls
	// return ErrClosed; Close itself may be called more than once.
	Close() error
}

// Opener opens a Log: DirConfig and dynamolog.Config are Openers, so a
// driver's configuration can hold either.
type Opener interface {
	// Open opens the log, creating it if it does not exist. The caller
	// must Close the returned Log.
	Open(ctx context.Context) (Log, error)
}

// SnapshotStore is implemented by a Log that also keeps snapshots of the
// state of a pipeline's stateful operators, beside its records. The driver
// writes a snapshot with PutSnapshot, then appends a record of its
// reference: only then is the snapshot current. A crash between the two
// leaves the previous snapshot current and the new one unreferenced. After
// a Replace, the driver calls PruneSnapshots with the current snapshot.
// Like records, snapshots are bytes the driver encodes and checks.
//
// The logs of this module implement it: a directory log keeps each
// snapshot in a file of its own, a DynamoDB log in chunked items.
type SnapshotStore interface {
	// PutSnapshot durably stores data as the snapshot of the state after
	// the batch at t and returns its reference. Storing a snapshot at a
	// time again replaces it.
	PutSnapshot(ctx context.Context, t batch.Time, data []byte) (ref string, err error)
	// GetSnapshot returns the data of the snapshot ref names, or an error
	// wrapping ErrNoSnapshot if the store does not hold it.
	GetSnapshot(ctx context.Context, ref string) ([]byte, error)
	// PruneSnapshots removes the snapshots older than the current one, the
	// snapshot at t that ref names ("" for none stored), which it keeps. It
	// only tidies up: the driver logs an error and goes on.
	PruneSnapshots(ctx context.Context, t batch.Time, ref string) error
}

// CorruptError reports a log that cannot be read as written: a damaged frame
// in the middle of a segment file, an entry that does not decode. It is never
// returned for the torn last entry a crash leaves, which is dropped. Recovery
// cannot safely proceed past it: the log must be restored, or deleted to
// start afresh.
type CorruptError struct {
	// Path is the file holding the damage, or for a DynamoDB log
	// "dynamodb:<table>/<log name>"; "recovery log" for a record that
	// does not decode though its log stored it intact, "snapshot <ref>"
	// for a snapshot that is damaged or not of the time its entry says.
	Path string
	// Offset is the byte offset in Path of the damaged frame, or the
	// sequence number of the damaged DynamoDB item, or the index from 0 of
	// the record that does not decode.
	Offset int64
	// Err says what is wrong.
	Err error
}

// Error describes the damage and what to do.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("recovery: corrupt log: %s at offset %d: %v; the log cannot be replayed: "+
		"restore it from a backup, or delete it to start fresh (its pending batches will then not be recomputed)",
		e.Path, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// usable reports why a log cannot serve a call: ErrClosed after Close, the
// sticky error of an earlier failure, or ctx's error; nil if it can.
func usable(ctx context.Context, closed bool, failed error) error {
	switch {
	case closed:
		return ErrClosed
	case failed != nil:
		return failed
	}
	return ctx.Err()
}
