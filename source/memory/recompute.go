package memory

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/weirstream/weir/batch"
)

// ErrBadRange is wrapped by the error Recompute returns for a block this
// Source cannot have pushed: a malformed range, a range of another stream or
// of a shard it does not have, a Count that disagrees with First and Last, or
// a BlockInfo.Count that disagrees with its ranges.
var ErrBadRange = errors.New("memory: bad range")

// RangeNotHeldError is the error Recompute returns for a well-formed range of
// one of the Source's shards whose records the Source does not hold: older
// than the Config.Retain records it keeps, or never pushed.
type RangeNotHeldError struct {
	// Range is the range asked for.
	Range batch.SeqRange
	// Oldest and Newest are the sequence numbers of the oldest and newest
	// records the shard holds (inclusive), both "" if it holds none.
	Oldest, Newest string
}

// Error describes the range and what the shard holds.
func (e *RangeNotHeldError) Error() string {
	if e.Oldest == "" {
		return fmt.Sprintf("memory: range %v not held: the shard holds no records", e.Range)
	}
	return fmt.Sprintf("memory: range %v not held: the shard holds %s..%s (Config.Retain bounds what is kept)",
		e.Range, e.Oldest, e.Newest)
}

// Recompute rebuilds the records of a block this Source pushed from its
// ranges, in the same order. It returns an error wrapping ErrBadRange for a
// block it cannot have pushed, a *RangeNotHeldError for a range whose records
// it no longer (or never) held, and ctx.Err() if ctx is done. It is safe for
// concurrent use, whether or not the Source runs. A BlockInfo.Count of 0 is
// not checked against the ranges.
func (s *Source[T]) Recompute(ctx context.Context, info batch.BlockInfo) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(info.Ranges) == 0 && info.Count > 0 {
		return nil, fmt.Errorf("memory: recompute %v: %w: %d records and no ranges", info.ID, ErrBadRange, info.Count)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []T
	for _, r := range info.Ranges {
		recs, err := s.rangeLocked(r)
		if err != nil {
			return nil, fmt.Errorf("memory: recompute %v: %w", info.ID, err)
		}
		out = append(out, recs...)
	}
	if info.Count != 0 && info.Count != len(out) {
		return nil, fmt.Errorf("memory: recompute %v: %w: Count %d, but its ranges hold %d records", info.ID, ErrBadRange, info.Count, len(out))
	}
	return out, nil
}

// rangeLocked returns the held records of r, sharing the log's array.
func (s *Source[T]) rangeLocked(r batch.SeqRange) ([]T, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRange, err)
	}
	if r.Stream != s.name {
		return nil, fmt.Errorf("%w: range %v: stream %q, this source's is %q", ErrBadRange, r, r.Stream, s.name)
	}
	i, ok := s.byName[r.Shard]
	if !ok {
		return nil, fmt.Errorf("%w: range %v: no shard %q here (shards are %s to %s)",
			ErrBadRange, r, r.Shard, ShardName(0), ShardName(len(s.shards)-1))
	}
	sh := s.shards[i]
	// Sequence numbers beyond 64 bits were never assigned: not held.
	first, err1 := strconv.ParseUint(r.First, 10, 64)
	last, err2 := strconv.ParseUint(r.Last, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, sh.notHeld(r)
	}
	if last-first+1 != uint64(r.Count) {
		return nil, fmt.Errorf("%w: range %v: Count %d, but %s..%s spans %d records", ErrBadRange, r, r.Count, r.First, r.Last, last-first+1)
	}
	if first < sh.first || last >= sh.nextSeq() {
		return nil, sh.notHeld(r)
	}
	return sh.records[first-sh.first : last-sh.first+1], nil
}

// notHeld returns the error for a range of the shard whose records it does
// not hold, naming what it does hold.
func (sh *shard[T]) notHeld(r batch.SeqRange) *RangeNotHeldError {
	e := &RangeNotHeldError{Range: r}
	if len(sh.records) > 0 {
		e.Oldest = strconv.FormatUint(sh.first, 10)
		e.Newest = strconv.FormatUint(sh.nextSeq()-1, 10)
	}
	return e
}
