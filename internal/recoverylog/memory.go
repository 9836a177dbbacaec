package recoverylog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
)

// MemoryStore is an in-memory recovery log for tests: what it holds
// survives closing the recovery.Log it opened, as a directory survives the
// process, so a test can "crash" a driver, open the store again and
// recover. Records are copied in and out, as a durable log keeps them, so a
// Read never shares memory with an Append. Faults can be injected into
// appends (SetAppendHook, FailNextAppend) and snapshot writes
// (SetSnapshotHook) to test what a driver does when one fails.
//
// A MemoryStore is safe for concurrent use. Only one Log may be open on it
// at a time, like a locked directory (recovery.ErrLocked). It is a
// recovery.Opener.
type MemoryStore struct {
	mu      sync.Mutex
	records [][]byte
	open    *memoryLog
	appends int
	hook    AppendHook
	snaps   map[string][]byte
	putSnap func(t batch.Time, data []byte) error
	frozen  error // see Freeze
}

// Freeze makes every later Append and Replace fail with err, storing
// nothing, as the writes of a process that died would never happen; nil
// ends it. A test freezes the store and stops a Run to crash it at any
// moment, even one at which the Run would write nothing.
func (m *MemoryStore) Freeze(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.frozen = err
}

// NewMemory returns an empty MemoryStore.
func NewMemory() *MemoryStore { return &MemoryStore{} }

// AppendHook is called by a MemoryStore on each Append, before anything is
// stored, with the number of the append (counted from 1 over the life of
// the store) and its entries, decoded. The Fault it returns decides what
// happens. It is called with the store locked, so it must not call the
// store.
type AppendHook func(n int, entries []Entry) Fault

// Fault is the fate of one Append decided by an AppendHook. The zero Fault
// lets the append succeed.
type Fault struct {
	// Err, if not nil, is returned by the Append.
	Err error
	// Keep is how many of the append's entries are stored anyway when Err
	// is not nil: 0 for an append that failed before writing, len(entries)
	// for one that took effect though its caller saw an error (a timeout),
	// in between for a crash part way.
	Keep int
}

// SetAppendHook makes h decide the fate of every later Append; nil removes
// the hook.
func (m *MemoryStore) SetAppendHook(h AppendHook) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = h
}

// FailNextAppend makes the next Append fail with err without storing
// anything; later appends succeed. It replaces any hook.
func (m *MemoryStore) FailNextAppend(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = func(int, []Entry) Fault {
		m.hook = nil
		return Fault{Err: err}
	}
}

// SetSnapshotHook makes h decide the fate of every later PutSnapshot: an
// error from h fails the put, which stores nothing (a snapshot write
// interrupted by a crash). nil removes the hook. h is called with the store
// locked, so it must not call the store.
func (m *MemoryStore) SetSnapshotHook(h func(t batch.Time, data []byte) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putSnap = h
}

// Entries returns the stored entries, as Read would, whether or not a Log is
// open: for assertions in tests. The records were appended through a Log,
// which encoded them, so they always decode.
func (m *MemoryStore) Entries() []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries, _ := DecodeEntries(m.records)
	return entries
}

// Snapshots returns a copy of the snapshots the store holds, by reference:
// for assertions in tests.
func (m *MemoryStore) Snapshots() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.snaps)
}

// Open opens the store as a recovery.Log, which is also a
// recovery.SnapshotStore. It returns recovery.ErrLocked if a Log opened
// before is still open.
func (m *MemoryStore) Open(ctx context.Context) (recovery.Log, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open != nil {
		return nil, recovery.ErrLocked
	}
	m.open = &memoryLog{m: m}
	return m.open, nil
}

// memoryLog is a Log on a MemoryStore; its fields are guarded by m.mu.
type memoryLog struct {
	m      *MemoryStore
	closed bool
}

func (l *memoryLog) lock(ctx context.Context) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.m.mu.Lock()
	if l.closed {
		l.m.mu.Unlock()
		return nil, recovery.ErrClosed
	}
	return l.m.mu.Unlock, nil
}

func clone(records [][]byte) [][]byte {
	out := make([][]byte, len(records))
	for i, r := range records {
		out[i] = slices.Clone(r)
	}
	return out
}

func (l *memoryLog) Append(ctx context.Context, records ...[]byte) error {
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if l.m.frozen != nil {
		return l.m.frozen
	}
	recs := clone(records)
	l.m.appends++
	var f Fault
	if l.m.hook != nil {
		entries, err := DecodeEntries(recs)
		if err != nil {
			return err
		}
		f = l.m.hook(l.m.appends, entries)
	}
	if f.Err != nil {
		l.m.records = append(l.m.records, recs[:min(max(f.Keep, 0), len(recs))]...)
		return f.Err
	}
	l.m.records = append(l.m.records, recs...)
	return nil
}

func (l *memoryLog) Read(ctx context.Context) ([][]byte, error) {
	unlock, err := l.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return clone(l.m.records), nil
}

func (l *memoryLog) Replace(ctx context.Context, records [][]byte) error {
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if l.m.frozen != nil {
		return l.m.frozen
	}
	l.m.records = clone(records)
	return nil
}

func memorySnapRef(t batch.Time) string { return fmt.Sprintf("memory-%d", int64(t)) }

func memorySnapTime(ref string) batch.Time {
	var t int64
	fmt.Sscanf(ref, "memory-%d", &t)
	return batch.Time(t)
}

// PutSnapshot stores a copy of data; see recovery.SnapshotStore.
func (l *memoryLog) PutSnapshot(ctx context.Context, t batch.Time, data []byte) (string, error) {
	unlock, err := l.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	if l.m.putSnap != nil {
		if err := l.m.putSnap(t, data); err != nil {
			return "", err
		}
	}
	if l.m.snaps == nil {
		l.m.snaps = make(map[string][]byte)
	}
	ref := memorySnapRef(t)
	l.m.snaps[ref] = slices.Clone(data)
	return ref, nil
}

// GetSnapshot returns a copy of the snapshot ref names; see
// recovery.SnapshotStore.
func (l *memoryLog) GetSnapshot(ctx context.Context, ref string) ([]byte, error) {
	unlock, err := l.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	b, ok := l.m.snaps[ref]
	if !ok {
		return nil, fmt.Errorf("%w: %q", recovery.ErrNoSnapshot, ref)
	}
	return slices.Clone(b), nil
}

// PruneSnapshots removes the snapshots older than t but ref's; see
// recovery.SnapshotStore.
func (l *memoryLog) PruneSnapshots(ctx context.Context, t batch.Time, ref string) error {
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for r := range l.m.snaps {
		if r != ref && memorySnapTime(r) < t {
			delete(l.m.snaps, r)
		}
	}
	return nil
}

func (l *memoryLog) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.m.open = nil
	}
	return nil
}
