package memory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

var errStartTwice = errors.New("memory: Start called more than once")

// Source is an in-process queue of records of type T that implements
// source.Receiver[T]. Records enter with Push or Send, before or after Start;
// Start moves them, one call's records at a time, into a source.BlockGenerator
// with their range, and the generator pushes them in blocks.
//
// A Source is started at most once. All methods are safe for concurrent use.
type Source[T any] struct {
	name      string
	maxQueued int
	retain    int
	shards    []*shard[T]    // fixed by New; their fields are guarded by mu
	byName    map[string]int // shard name -> index in shards; fixed by New
	wake      chan struct{}  // capacity 1: records were queued or Stop was called
	done      chan struct{}  // closed when Start returns
	mu        sync.Mutex     // guards what follows and the shards' fields
	pending   []queued[T]    // pushed, not yet added to the generator, in push order
	next      int            // index of the shard the next Push or Send goes to
	unstored  int            // records pushed and not yet in a stored block
	changed   chan struct{}  // closed and replaced when unstored shrinks or the state changes
	started   bool           // Start was called
	stopping  bool           // Stop was called
	ended     bool           // Start returned
}

// shard is the log of one synthetic shard.
type shard[T any] struct {
	name    string
	first   uint64 // sequence number of records[0]
	records []T    // the retained records, oldest first
	latest  string // greatest sequence number in a stored block, or ""
}

// nextSeq returns the sequence number the shard's next record gets.
func (sh *shard[T]) nextSeq() uint64 { return sh.first + uint64(len(sh.records)) }

// queued is the records of one Push or Send call, waiting to be added to the
// generator.
type queued[T any] struct {
	records []T
	rng     batch.SeqRange
}

// New returns a Source configured by cfg, or an error wrapping
// ErrInvalidConfig that names every bad field.
func New[T any](cfg Config) (*Source[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Source[T]{
		name:      cfg.Name,
		maxQueued: cfg.MaxQueued,
		retain:    cfg.Retain,
		byName:    make(map[string]int, cfg.Shards),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		changed:   make(chan struct{}),
	}
	for i := range cfg.Shards {
		name := ShardName(i)
		s.shards = append(s.shards, &shard[T]{name: name, first: 1})
		s.byName[name] = i
	}
	return s, nil
}

// ShardName returns the name of synthetic shard i (from 0), Kinesis style:
// ShardName(3) is "shardId-000000000003".
func ShardName(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// Shards returns the names of the Source's shards, in order.
func (s *Source[T]) Shards() []string {
	names := make([]string, len(s.shards))
	for i, sh := range s.shards {
		names[i] = sh.name
	}
	return names
}

// Push queues records for delivery, all to the same shard, and returns at
// once: it never blocks, whatever the queue holds. Records pushed before
// Start are delivered after it starts. After Stop was called, or after Start
// returned, Push queues nothing and returns an error wrapping
// source.ErrStopped, so no record is dropped unseen. Push keeps no reference
// to the records slice.
func (s *Source[T]) Push(records ...T) error {
	if len(records) == 0 {
		return nil
	}
	s.mu.Lock()
	err := s.closedLocked()
	if err == nil {
		s.enqueueLocked(records)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.signal()
	return nil
}

// Send is Push for producers that want backpressure: it waits, honouring
// ctx, while more than Config.MaxQueued records are queued and not yet in a
// stored block, then queues records like Push. It returns ctx.Err() if ctx is
// done first, and an error wrapping source.ErrStopped once Stop was called or
// Start returned; then nothing is queued.
func (s *Source[T]) Send(ctx context.Context, records ...T) error {
	s.mu.Lock()
	for {
		if err := s.closedLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		if len(records) == 0 || s.unstored <= s.maxQueued {
			break
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
	}
	if len(records) > 0 {
		s.enqueueLocked(records)
	}
	s.mu.Unlock()
	s.signal()
	return nil
}

// closedLocked returns the error Send returns once the Source takes no more
// records, or nil.
func (s *Source[T]) closedLocked() error {
	switch {
	case s.stopping:
		return fmt.Errorf("memory: Stop was called: %w", source.ErrStopped)
	case s.ended:
		return fmt.Errorf("memory: Start returned: %w", source.ErrStopped)
	}
	return nil
}

// enqueueLocked appends records to the log of the next shard and queues them
// with their range.
func (s *Source[T]) enqueueLocked(records []T) {
	sh := s.shards[s.next]
	s.next = (s.next + 1) % len(s.shards)
	first := sh.nextSeq()
	sh.records = append(sh.records, records...)
	n := len(sh.records)
	// The queued records share the log's array: records are never modified
	// once logged, and trimming only reslices.
	q := queued[T]{
		records: sh.records[n-len(records) : n : n],
		rng: batch.SeqRange{
			Stream: s.name,
			Shard:  sh.name,
			First:  strconv.FormatUint(first, 10),
			Last:   strconv.FormatUint(first+uint64(len(records))-1, 10),
			Count:  len(records),
		},
	}
	if s.retain > 0 && n > s.retain {
		drop := n - s.retain
		sh.records = sh.records[drop:]
		sh.first += uint64(drop)
	}
	s.pending = append(s.pending, q)
	s.unstored += len(records)
}

// signal wakes Start's feeding loop, without blocking.
func (s *Source[T]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// broadcastLocked wakes every Send waiting for room or for a state change.
func (s *Source[T]) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// LatestStored returns the greatest sequence number of shard whose block
// push has returned (the block is in the store and logged), or "" if there is
// none yet or no such shard. It mirrors the Kinesis source's checkpointable
// position.
func (s *Source[T]) LatestStored(shard string) string {
	i, ok := s.byName[shard]
	if !ok {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shards[i].latest
}

// stored records that a block with these ranges was pushed.
func (s *Source[T]) stored(ranges []batch.SeqRange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range ranges {
		if i, ok := s.byName[r.Shard]; ok && r.Stream == s.name {
			s.shards[i].latest = batch.MaxSeq(s.shards[i].latest, r.Last)
			s.unstored -= r.Count
		}
	}
	s.broadcastLocked()
}

// Start delivers queued records in blocks through rt.Push until Stop is
// called or ctx is done; see source.Receiver. Zero fields of rt take the
// defaults of source.Runtime.WithDefaults.
//
// After Stop, Start pushes every record queued when Stop was called (every
// Push or Send that returned before Stop was called, and any that won a race
// with it), then returns nil. If ctx is done first it returns ctx.Err(), and
// records not yet pushed are dropped. If a push fails for good it returns
// that error. Calling Start a second time returns an error.
func (s *Source[T]) Start(ctx context.Context, rt source.Runtime[T]) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errStartTwice
	}
	s.started = true
	s.mu.Unlock()

	if push := rt.Push; push != nil {
		// Wrapped rather than observed with onStored so that the Source
		// learns the exact ranges of each stored block, whatever BlockInfo
		// the push returns.
		rt.Push = func(ctx context.Context, b source.Block[T]) (batch.BlockInfo, error) {
			info, err := push(ctx, b)
			if err == nil {
				s.stored(b.Ranges)
			}
			return info, err
		}
	}
	err := s.run(ctx, source.NewBlockGenerator(rt, nil))

	s.mu.Lock()
	s.ended = true
	s.broadcastLocked()
	s.mu.Unlock()
	close(s.done)
	return err
}

// run owns the generator's Run goroutine and feeds the generator from the
// calling one.
func (s *Source[T]) run(ctx context.Context, gen *source.BlockGenerator[T]) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var runErr error
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		runErr = gen.Run(runCtx)
	}()
	if s.feed(ctx, gen, runDone) {
		// Stop's flush. Its error can only be Run's or ctx's, both
		// returned below.
		_ = gen.Stop(ctx)
	}
	cancel()
	<-runDone
	if runErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return runErr
}

// feed adds queued records to gen as they come, until Stop was called and
// everything queued then is added (it returns true), or ctx is done or gen's
// Run returned (false). An Add error is not returned: it can only be ctx's
// or Run's, which run reports.
func (s *Source[T]) feed(ctx context.Context, gen *source.BlockGenerator[T], runDone <-chan struct{}) bool {
	for {
		s.mu.Lock()
		todo, stopping := s.pending, s.stopping
		s.pending = nil
		s.mu.Unlock()
		for _, q := range todo {
			if err := gen.Add(ctx, q.records, q.rng); err != nil {
				return false
			}
		}
		if stopping {
			return true
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return false
		case <-runDone:
			return false
		}
	}
}

// Stop asks Start to push every record queued now and return, and waits
// until Start has returned (then it returns nil; Start's own error, if any, is
// Start's to return) or ctx is done (it returns ctx.Err()). Called before
// Start, it returns nil at once, and a later Start delivers what was queued
// and returns nil. Idempotent.
func (s *Source[T]) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		s.broadcastLocked()
	}
	started := s.started
	s.mu.Unlock()
	s.signal()
	if !started {
		return nil
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
