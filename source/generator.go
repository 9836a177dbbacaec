package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/sealtime"
)

// Push retry policy. A failed push is tried again after a jittered,
// exponentially growing wait: the n-th retry waits a uniformly random time
// in [w/2, w] with w = pushBackoffBase * 2^(n-1), that is about 100ms, 200ms,
// 400ms, 800ms and 1.6s, so a push is given up after pushAttempts attempts and
// at most 3.1s of waiting. A push fails when the block store or the recovery
// log does; a few seconds ride out a hiccup, and anything longer is better
// reported to the driver than hidden.
const (
	pushAttempts    = 6
	pushBackoffBase = 100 * time.Millisecond
)

// maxQueuedBlocks bounds the sealed blocks a generator holds waiting to be
// pushed. The driver's push waits while its source has enough blocks not
// yet in a batch, so a full queue means the pipeline is behind: a few
// blocks let the reader run ahead of a push that waits for a batch cut,
// and more would only hold more memory.
const maxQueuedBlocks = 10

var errRunTwice = errors.New("source: BlockGenerator.Run called more than once")

// BlockGenerator turns records into blocks that remember the sequence ranges
// their records were read from, and pushes them in order. It carries Spark's
// BlockGenerator listener rules (SPARK-9217) into one type:
//
//   - Add appends a batch of records and its ranges to the open block under
//     the generator's lock, and sealing takes the same lock, so a batch is
//     never split across blocks and a block's ranges are exactly those of its
//     records, in the order they were added.
//   - Every BlockInterval the open block is sealed and queued, unless it is
//     empty (empty blocks are never pushed) or the queue is full. Seals
//     come a little before each multiple of BlockInterval since the Unix
//     epoch (a few milliseconds before, growing with the interval), so that a
//     block sealed at a batch boundary is in that batch.
//   - One goroutine pushes the queued blocks one at a time, in seal order,
//     retrying a failed push a few times, and calls onStored after each
//     successful push, without holding the lock.
//
// The queue holds at most 10 sealed blocks, counting the one being pushed; while it is full Add blocks, which is the backpressure a
// receiver passes on to its reader. (The bytes of those blocks are the
// receiver's to bound: Runtime.MaxBufferedBytes.)
//
// The zero value is not usable; call NewBlockGenerator. All methods are safe
// for concurrent use.
type BlockGenerator[T any] struct {
	rt        Runtime[T] // with defaults applied
	invalid   error      // rt.Validate(), returned by Run
	maxQueued int        // maxQueuedBlocks; tests set less before Run
	onStored  func(ctx context.Context, info batch.BlockInfo)

	work chan struct{} // capacity 1: a block was sealed or Stop was called
	done chan struct{} // closed when Run returns

	mu       sync.Mutex
	cur      Block[T]      // the open block
	queue    []Block[T]    // sealed, not yet pushed; queue[0] is being pushed
	changed  chan struct{} // closed and replaced when the queue shrinks or the state changes
	stopping bool          // Stop was called
	running  bool          // Run was called
	ended    bool          // Run returned
	runErr   error         // what Run returned
}

// NewBlockGenerator returns a generator that seals a block every
// rt.BlockInterval and pushes it with rt.Push. onStored (may be nil) is called
// after each successful push, with the BlockInfo the push returned, in block
// order, from the pushing goroutine, never while holding a lock that Add
// takes. Its ctx is Run's.
//
// Zero fields of rt take their defaults (see Runtime.WithDefaults: a block
// every 200ms). An rt that Runtime.Validate rejects (nil Push, negative
// BlockInterval) is not refused here:
// Run returns the validation error at once, and Add then returns ErrStopped.
func NewBlockGenerator[T any](rt Runtime[T], onStored func(ctx context.Context, info batch.BlockInfo)) *BlockGenerator[T] {
	rt = rt.WithDefaults()
	return &BlockGenerator[T]{
		rt:        rt,
		invalid:   rt.Validate(),
		maxQueued: maxQueuedBlocks,
		onStored:  onStored,
		work:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		changed:   make(chan struct{}),
	}
}

// Add adds records, read from the given ranges, to the current block
// atomically: all of them land in the same block and the block's ranges are
// exactly those of the records in it. Add keeps no reference to records or
// ranges, and does not check the ranges: they are the caller's account of
// where the records came from. Records added without ranges are pushed but cannot be recomputed
// from their source; an empty records slice adds nothing, not even its ranges.
//
// It blocks (honouring ctx) while the queue of sealed blocks is full (a
// few blocks: the pipeline is behind): that is the backpressure. After Stop, or once Run
// has returned, it returns an error wrapping ErrStopped. Safe for concurrent
// use.
func (g *BlockGenerator[T]) Add(ctx context.Context, records []T, ranges ...batch.SeqRange) error {
	_, err := g.AddIf(ctx, nil, records, ranges...)
	return err
}

// AddIf is Add for records that may be added only while admit says so (a
// reader's lease is still held, say): once the queue has room, it calls
// admit, without holding the generator's lock, and adds the records only
// if admit returns true. It reports whether it added them. Add's wait for
// room may be long, so admit is asked after it, and asked again after
// any wait: the answer that lets records in is never older than the time
// it takes to lock the generator. A nil admit admits every call; an empty
// records slice adds nothing and admit is not called.
func (g *BlockGenerator[T]) AddIf(ctx context.Context, admit func() bool, records []T, ranges ...batch.SeqRange) (bool, error) {
	admitted := admit == nil
	g.mu.Lock()
	for {
		if err := g.closedLocked(); err != nil {
			g.mu.Unlock()
			return false, err
		}
		if len(records) == 0 {
			g.mu.Unlock()
			return false, nil
		}
		if len(g.queue) < g.maxQueued {
			if admitted {
				break
			}
			g.mu.Unlock()
			if !admit() {
				return false, nil
			}
			admitted = true
			g.mu.Lock()
			continue // the queue may have filled meanwhile
		}
		admitted = admit == nil // an answer from before a wait is stale
		changed := g.changed
		g.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		g.mu.Lock()
	}
	g.cur.Records = append(g.cur.Records, records...)
	g.cur.Ranges = append(g.cur.Ranges, ranges...)
	g.mu.Unlock()
	return true, nil
}

// closedLocked returns the error Add returns once the generator takes no more
// records, or nil.
func (g *BlockGenerator[T]) closedLocked() error {
	switch {
	case g.stopping:
		return ErrStopped
	case g.ended && g.runErr != nil:
		return fmt.Errorf("%w: Run ended: %w", ErrStopped, g.runErr)
	case g.ended:
		return ErrStopped
	}
	return nil
}

// Run seals and pushes until Stop has flushed everything (returns nil) or ctx
// is done (returns ctx.Err()) or a push failed after its retries (returns that
// error, wrapped). Blocks still queued when it returns with an error are
// dropped, which is safe: none of them was reported as stored. Run may be
// called only once; the generator cannot be restarted.
func (g *BlockGenerator[T]) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.running {
		g.mu.Unlock()
		return errRunTwice
	}
	g.running = true
	g.mu.Unlock()

	err := g.invalid
	if err == nil {
		err = g.run(ctx)
	}

	g.mu.Lock()
	g.ended = true
	g.runErr = err
	g.broadcastLocked()
	g.mu.Unlock()
	close(g.done)
	return err
}

// run owns the sealing goroutine and pushes from the calling one.
func (g *BlockGenerator[T]) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { g.sealEvery(ctx) })
	err := g.pushAll(ctx)
	cancel()
	wg.Wait()
	return err
}

// sealEvery seals the open block every rt.BlockInterval until ctx is done,
// at times aligned on the interval (see sealLead). Each wait is measured
// from the clock again, so a seal that came late (a busy machine) does
// not delay every later one: the next seal is at the next aligned time.
func (g *BlockGenerator[T]) sealEvery(ctx context.Context) {
	clk, iv := g.rt.Clock, g.rt.BlockInterval
	t := clk.NewTimer(untilSeal(clk.Now(), iv))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			g.sealNow()
			t.Reset(untilSeal(clk.Now(), iv))
		}
	}
}

// sealNow seals the open block, if it holds records, and wakes the pusher.
func (g *BlockGenerator[T]) sealNow() {
	g.mu.Lock()
	sealed := g.sealLocked()
	g.mu.Unlock()
	if sealed {
		g.signal()
	}
}

// sealLead is how long before each multiple of the block interval (since
// the Unix epoch) a block is sealed (see sealtime.Lead): records wait for
// the next seal, then at most sealLead for their batch.
func sealLead(iv time.Duration) time.Duration { return sealtime.Lead(iv) }

// untilSeal returns the time from now to the first seal: the next multiple
// of iv since the Unix epoch, less sealLead.
func untilSeal(now time.Time, iv time.Duration) time.Duration {
	lead := sealLead(iv)
	n, ivn := now.UnixNano(), iv.Nanoseconds()
	next := ((n+lead.Nanoseconds())/ivn+1)*ivn - lead.Nanoseconds()
	return time.Duration(next - n)
}

// sealLocked queues the open block and opens a new one, unless the open
// block is empty. It reports whether it sealed. The queue-full check only
// restates the bound: Add adds only while the queue has room, so a non-empty
// open block always fits.
func (g *BlockGenerator[T]) sealLocked() bool {
	if len(g.cur.Records) == 0 || len(g.queue) >= g.maxQueued {
		return false
	}
	g.queue = append(g.queue, g.cur)
	// Blocks of a steady stream are alike: size the next like the last, so
	// that Add rarely grows the slices under the lock.
	g.cur = Block[T]{
		Ranges:  make([]batch.SeqRange, 0, len(g.cur.Ranges)),
		Records: make([]T, 0, len(g.cur.Records)),
	}
	return true
}

// signal wakes the pusher, without blocking.
func (g *BlockGenerator[T]) signal() {
	select {
	case g.work <- struct{}{}:
	default:
	}
}

// broadcastLocked wakes every Add waiting for the queue or the state to
// change.
func (g *BlockGenerator[T]) broadcastLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// pushAll pushes queued blocks in order until Stop has flushed everything,
// ctx is done or a push fails for good.
func (g *BlockGenerator[T]) pushAll(ctx context.Context) error {
	for {
		b, ok, flushed := g.next()
		if flushed {
			return nil
		}
		if !ok {
			select {
			case <-g.work:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		info, err := g.push(ctx, b)
		if err != nil {
			return err
		}
		g.mu.Lock()
		g.queue[0] = Block[T]{}
		g.queue = g.queue[1:]
		g.broadcastLocked()
		g.mu.Unlock()
		g.rt.Logger.Debug("source: block pushed", "block", info.ID, "records", len(b.Records), "ranges", len(b.Ranges))
		if g.onStored != nil {
			g.onStored(ctx, info)
		}
	}
}

// next returns the block to push, if any, and reports whether Stop was called
// and everything has been pushed. Once Stop was called and the queue is
// empty, it seals the open block whatever the time: that is Stop's flush.
func (g *BlockGenerator[T]) next() (b Block[T], ok, flushed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 && g.stopping {
		g.sealLocked()
	}
	if len(g.queue) > 0 {
		return g.queue[0], true, false
	}
	return Block[T]{}, false, g.stopping
}

// push pushes b, retrying as pushAttempts and pushBackoffBase describe, and
// reports each failure it retries through rt.ReportError.
func (g *BlockGenerator[T]) push(ctx context.Context, b Block[T]) (batch.BlockInfo, error) {
	wait := backoff.Policy{Base: pushBackoffBase, Max: pushBackoffBase << (pushAttempts - 2)}.Start()
	for attempt := 1; ; attempt++ {
		info, err := g.rt.Push(ctx, b)
		if err == nil {
			return info, nil
		}
		if ctx.Err() != nil {
			return batch.BlockInfo{}, ctx.Err()
		}
		if attempt == pushAttempts {
			return batch.BlockInfo{}, fmt.Errorf("source: push of a block of %d records failed %d times, giving up: %w",
				len(b.Records), attempt, err)
		}
		d := wait.Next()
		g.rt.ReportError(fmt.Errorf("source: push of a block of %d records failed (attempt %d of %d), retrying in %v: %w",
			len(b.Records), attempt, pushAttempts, d, err))
		if err := clock.Sleep(ctx, g.rt.Clock, d); err != nil {
			return batch.BlockInfo{}, err
		}
	}
}

// Stop seals the current block, waits until every sealed block is pushed and
// Run returned, or ctx is done. Idempotent.
//
// Step by step: Add starts returning ErrStopped (an Add waiting for room in
// the queue returns it too); Run pushes what is queued, then the open block,
// then returns nil. Stop then returns nil, or ctx.Err() if ctx is done first,
// or, if Run returned an error instead of flushing, an error wrapping it. If
// Run was never called, Stop waits for it (a receiver's Stop may race its
// Start), so pass a ctx with a deadline.
func (g *BlockGenerator[T]) Stop(ctx context.Context) error {
	g.mu.Lock()
	if !g.stopping {
		g.stopping = true
		g.broadcastLocked()
	}
	g.mu.Unlock()
	g.signal()
	select {
	case <-g.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	err := g.runErr
	g.mu.Unlock()
	if err != nil {
		return fmt.Errorf("source: block generator ended without flushing: %w", err)
	}
	return nil
}
