package recovery

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/weirstream/weir/batch"
)

// MemoryStore is an in-memory log store for tests: what it holds survives
// closing the Log it opened, as a directory survives the process, so a test
// can "crash" a driver, open the store again and recover. Entries are kept
// encoded, as a durable log keeps them, so a Read never shares memory with
// an Append. Faults can be injected into appends (SetAppendHook,
// FailNextAppend) to test what a driver does when one fails.
//
// A MemoryStore is safe for concurrent use. Only one Log may be open on it
// at a time, like a locked directory. Create one with Memory.
type MemoryStore struct {
	mu      sync.Mutex
	entries [][]byte
	open    *memoryLog
	appends int
	hook    AppendHook
	snaps   map[string][]byte
	putSnap func(t batch.Time, data []byte) error
}

// Memory returns an empty MemoryStore.
func Memory() *MemoryStore { return &MemoryStore{} }

// AppendHook is called by a MemoryStore on each Append, after the entries are
// validated and before anything is stored, with the number of the append
// (counted from 1 over the life of the store) and its entries. The Fault it
// returns decides what happens. It is called with the store locked, so it
// must not call the store.
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

// Entries returns the stored entries, as Read would, whether or not a Log is
// open: for assertions in tests. The entries were encoded by this package
// from valid entries, so they always decode.
func (m *MemoryStore) Entries() []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries, _ := DecodeEntries(m.entries)
	return entries
}

// Open opens the store as a Log. It returns ErrLocked if a Log opened
// before is still open.
func (m *MemoryStore) Open(ctx context.Context) (Log, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open != nil {
		return nil, ErrLocked
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
		return nil, ErrClosed
	}
	return l.m.mu.Unlock, nil
}

func (l *memoryLog) Append(ctx context.Context, entries ...Entry) error {
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	enc, err := EncodeEntries(entries, 0)
	if err != nil {
		return err
	}
	l.m.appends++
	var f Fault
	if l.m.hook != nil {
		f = l.m.hook(l.m.appends, entries)
	}
	if f.Err != nil {
		l.m.entries = append(l.m.entries, enc[:min(max(f.Keep, 0), len(enc))]...)
		return f.Err
	}
	l.m.entries = append(l.m.entries, enc...)
	return nil
}

func (l *memoryLog) Read(ctx context.Context) ([]Entry, error) {
	unlock, err := l.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return DecodeEntries(l.m.entries)
}

func (l *memoryLog) Compact(ctx context.Context) error {
	unlock, err := l.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	enc, err := CompactEncoded(l.m.entries, 0)
	if err != nil {
		return err
	}
	l.m.entries = enc
	if cur, err := CurrentSnapshot(enc); err == nil && cur != nil {
		for ref := range l.m.snaps {
			if ref != cur.Ref && memorySnapTime(ref) < cur.Time {
				delete(l.m.snaps, ref)
			}
		}
	}
	return nil
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

// Snapshots returns a copy of the snapshots the store holds, by reference:
// for assertions in tests.
func (m *MemoryStore) Snapshots() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.snaps)
}

func memorySnapRef(t batch.Time) string { return fmt.Sprintf("memory-%d", int64(t)) }

func memorySnapTime(ref string) batch.Time {
	var t int64
	fmt.Sscanf(ref, "memory-%d", &t)
	return batch.Time(t)
}

// PutSnapshot stores a copy of data; see SnapshotStore.
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
	l.m.snaps[ref] = frameSnapshot(t, data)
	return ref, nil
}

// GetSnapshot returns a copy of the snapshot ref names; see SnapshotStore.
func (l *memoryLog) GetSnapshot(ctx context.Context, ref string) ([]byte, error) {
	unlock, err := l.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	b, ok := l.m.snaps[ref]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSnapshot, ref)
	}
	_, data, err := unframeSnapshot(b)
	if err != nil {
		return nil, &CorruptError{Path: "memory:" + ref, Err: err}
	}
	return append([]byte(nil), data...), nil
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
