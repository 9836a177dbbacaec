package shardstate

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Memory is a Store in memory, for tests: one process's workers share it.
// The zero value is empty and ready.
type Memory struct {
	mu     sync.Mutex
	shards map[string]*memShard
}

type memShard struct {
	fence fence
	shape string
	snap  Snapshot
}

var _ Store = (*Memory)(nil)

func (m *Memory) shard(key Key) *memShard {
	if m.shards == nil {
		m.shards = map[string]*memShard{}
	}
	s := m.shards[key.String()]
	if s == nil {
		s = &memShard{}
		m.shards[key.String()] = s
	}
	return s
}

// Put implements Store.
func (m *Memory) Put(ctx context.Context, key Key, snap Snapshot) error {
	if err := check(key, snap); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	s := m.shard(key)
	if !s.fence.admits(snap.Lease, &snap.Position) {
		return fencedError(key, snap.Lease, s.fence)
	}
	snap.Data = slices.Clone(snap.Data)
	s.fence = fence{claimed: true, lease: snap.Lease, snapshot: snap.Lease, has: true, order: snap.Position.order()}
	s.shape, s.snap = key.Shape, snap
	return nil
}

// Claim implements Store.
func (m *Memory) Claim(ctx context.Context, key Key, lease Lease) error {
	if err := key.validate(); err != nil {
		return err
	}
	if err := lease.validate(); err != nil {
		return fmt.Errorf("%w: shard %s: %w", ErrInvalid, key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	s := m.shard(key)
	if !s.fence.admits(lease, nil) {
		return fencedError(key, lease, s.fence)
	}
	s.fence.claimed, s.fence.lease = true, lease
	return nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key Key) (Snapshot, error) {
	if err := key.validate(); err != nil {
		return Snapshot{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	s := m.shard(key)
	switch {
	case !s.fence.has:
		return Snapshot{}, fmt.Errorf("%w: shard %s", ErrNoSnapshot, key)
	case s.shape != key.Shape:
		return Snapshot{}, shapeError(key, s.shape)
	}
	snap := s.snap
	snap.Data = slices.Clone(snap.Data)
	return snap, nil
}
