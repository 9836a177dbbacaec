package stream

import (
	"sync"

	"github.com/weirstream/weir/batch"
)

// blockStore is a source's in-process block store: the records of each
// stored block, by ID, until the batch holding the block is complete. It is
// safe for concurrent use. The zero value is an empty store.
type blockStore[T any] struct {
	mu     sync.Mutex
	blocks map[batch.BlockID][]T
	n      int
}

// Put stores the records of block id, replacing any held under that ID. A
// block with no records is held too. The store keeps the slice itself, not a
// copy: the caller must not modify it afterwards.
func (s *blockStore[T]) Put(id batch.BlockID, records []T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blocks == nil {
		s.blocks = make(map[batch.BlockID][]T)
	}
	s.n += len(records) - len(s.blocks[id])
	s.blocks[id] = records
}

// Get returns the records of block id, and whether the store has it. The
// slice is the one the store holds: callers must not modify it.
func (s *blockStore[T]) Get(id batch.BlockID) ([]T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.blocks[id]
	return r, ok
}

// Delete removes the given blocks; absent IDs are ignored.
func (s *blockStore[T]) Delete(ids ...batch.BlockID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.n -= len(s.blocks[id])
		delete(s.blocks, id)
	}
}

// Len returns the number of blocks held and the number of records in them.
func (s *blockStore[T]) Len() (blocks, records int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.blocks), s.n
}
