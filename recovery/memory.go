package recovery

import (
	"context"
	"sync"
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
