package recovery

import (
	"context"
	"errors"
	"fmt"
)

// Errors a Log returns, to branch on with errors.Is.
var (
	// ErrClosed is returned by calls on a Log after Close.
	ErrClosed = errors.New("recovery: log closed")
	// ErrLocked is returned by Open when another writer holds the log: a
	// directory locked by another process (or another open log in this
	// one), a MemoryStore already open.
	ErrLocked = errors.New("recovery: log is in use by another writer")
	// ErrFenced is returned by Append and Compact on a DynamoDB log that
	// another writer has opened since: this writer must stop.
	ErrFenced = errors.New("recovery: log taken over by another writer")
	// ErrEntryTooLarge is returned by Append for an entry whose encoding
	// exceeds what the log can store in one piece.
	ErrEntryTooLarge = errors.New("recovery: entry too large")
	// ErrInvalidConfig is wrapped by the error of opening a log with a bad
	// configuration; the message names every bad field and its fix.
	ErrInvalidConfig = errors.New("recovery: invalid config")
	// ErrCorrupt is matched (errors.Is) by every *CorruptError.
	ErrCorrupt = errors.New("recovery: corrupt log")
)

// Log is the metadata log of a pipeline: what recovery needs to know about
// blocks and batches, in the order it happened. Implementations are safe for
// concurrent use: concurrent appends are serialised, each Append's entries
// staying together, in one order that Read returns.
type Log interface {
	// Append adds entries to the log, in order, and returns once they are
	// durable: any later Read, after a crash or on another machine for a
	// shared log, returns them. Every entry must Validate, or nothing is
	// appended. If Append fails, a prefix of entries (possibly none, possibly
	// all) may have been appended; the caller must treat the failure as
	// fatal to this writer and recover from the log after a restart.
	Append(ctx context.Context, entries ...Entry) error
	// Read returns every entry of the log in append order, compacted
	// entries replaced by what Compact kept.
	Read(ctx context.Context) ([]Entry, error)
	// Compact replaces the log's entries with the shortest log that
	// recovers to the same State (State.Entries): it drops completed
	// batches and the blocks only they referenced, and keeps the shape, the
	// pending batches with their blocks, the unallocated blocks and the
	// progress (last completed batch, next block Seq per source, greatest
	// sequence number per shard not finished). A crash during Compact leaves a log that
	// recovers to the same State (the old entries, the new, or for a
	// DynamoDB log possibly the old followed by some of the new). It fails,
	// changing nothing, on a log that Recover refuses.
	Compact(ctx context.Context) error
	// Close releases the log (its lock, files, handles). Later calls
	// return ErrClosed; Close itself may be called more than once.
	Close() error
}

// Opener opens a Log: DirConfig, dynamolog.Config and MemoryStore are Openers,
// so a driver's configuration can hold any of them.
type Opener interface {
	// Open opens the log, creating it if it does not exist. The caller
	// must Close the returned Log.
	Open(ctx context.Context) (Log, error)
}

// CorruptError reports a log that cannot be read as written: a damaged frame
// in the middle of a segment file, an entry that does not decode. It is never
// returned for the torn last entry a crash leaves, which is dropped. Recovery
// cannot safely proceed past it: the log must be restored, or deleted to
// start afresh.
type CorruptError struct {
	// Path is the file holding the damage, or for a DynamoDB log
	// "dynamodb:<table>/<log name>".
	Path string
	// Offset is the byte offset in Path of the damaged frame, or the
	// sequence number of the damaged DynamoDB item.
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

// CompactEncoded returns the encoded compacted form of the encoded entries
// payloads (see Log.Compact and EncodeEntries for limit): for Log
// implementations, which keep their entries encoded.
func CompactEncoded(payloads [][]byte, limit int) ([][]byte, error) {
	entries, err := DecodeEntries(payloads)
	if err != nil {
		return nil, err
	}
	st, err := Recover(entries)
	if err != nil {
		return nil, fmt.Errorf("recovery: compact: %w", err)
	}
	return EncodeEntries(st.Entries(), limit)
}

// DecodeEntries decodes payloads EncodeEntries encoded: for Log
// implementations.
func DecodeEntries(payloads [][]byte) ([]Entry, error) {
	out := make([]Entry, len(payloads))
	for i, p := range payloads {
		e, err := DecodeEntry(p)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// EncodeEntries encodes entries, refusing all of them if one is invalid or,
// when limit > 0, if one's encoding is longer than limit bytes (an error
// wrapping ErrEntryTooLarge): for Log implementations.
func EncodeEntries(entries []Entry, limit int) ([][]byte, error) {
	out := make([][]byte, len(entries))
	for i, e := range entries {
		b, err := EncodeEntry(e)
		if err != nil {
			return nil, err
		}
		if limit > 0 && len(b) > limit {
			return nil, fmt.Errorf("%w: %v encodes to %d bytes, more than the %d this log stores in one entry",
				ErrEntryTooLarge, e, len(b), limit)
		}
		out[i] = b
	}
	return out, nil
}

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
