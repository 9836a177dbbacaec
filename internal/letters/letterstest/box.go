package letterstest

import (
	"context"
	"slices"
	"sync"

	"github.com/weirstream/weir/stream"
)

// Box is a stream.DeadLetters in memory that keeps every letter it is
// given, in order, for tests of outputs with stream.Quarantine.
type Box struct {
	mu      sync.Mutex
	letters []stream.DeadLetter
}

// Quarantine keeps letters.
func (b *Box) Quarantine(_ context.Context, letters []stream.DeadLetter) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.letters = append(b.letters, letters...)
	return nil
}

// Letters returns the letters kept so far.
func (b *Box) Letters() []stream.DeadLetter {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.letters)
}
