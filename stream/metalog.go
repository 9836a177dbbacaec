package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
)

// metaLog is where the driver records its progress so that a restarted
// driver can recompute exactly the same batches (DESIGN.md, Recovery). The
// recovery package's logs plug in through recoveryLog; without one the
// driver uses noLog. Tests plug in fakes.
//
// Each method returns only once the record is durable; an error is fatal to
// the pipeline, because continuing would break the guarantees.
type metaLog interface {
	// blockStored records a block before the push that stored it returns, so
	// a receiver may treat the block's sequence numbers as stored, and, if
	// t is not 0, that the block is in the batch at t (see batchTags).
	blockStored(ctx context.Context, info batch.BlockInfo, t batch.Time) error
	// batchAllocated records the blocks of a batch before any output runs.
	// If logged, every one of them was recorded in the batch by
	// blockStored: nothing is recorded, but an error is returned if a
	// record failed, which may have left one of them in the log.
	batchAllocated(ctx context.Context, t batch.Time, blocks []batch.BlockInfo, logged bool) error
	// batchCompleted records that every output of batch t succeeded, before
	// receivers are told their blocks are completed.
	batchCompleted(ctx context.Context, t batch.Time) error
	// batchSkipped records, before any output runs, that the batch at t is
	// empty and will be neither allocated nor completed in the log: a
	// pipeline logs its empty batches that change no state only as
	// reserved batch times, so that a restart never reuses t.
	batchSkipped(ctx context.Context, t batch.Time) error
	// emptyRun records, before its stateful operators tick, that the
	// batch at t, an interval every after the one before, is empty and
	// will be neither allocated nor completed in the log: a stateful
	// pipeline logs the empty batches that move its state as runs of
	// empty batches (recoverylog.EmptyRun), which a restart replays or
	// runs again. The batch runner calls it, in time order.
	emptyRun(ctx context.Context, t batch.Time, every time.Duration) error
	// runCompleted notes that the empty batch at t of a run completed,
	// which no entry records (a later entry implies it): the batch runner
	// calls it, and release records it if no later entry did.
	runCompleted(t batch.Time)
	// shardFinished records that a shard is finished for good (see
	// source.Runtime.ShardFinished).
	shardFinished(ctx context.Context, stream, shard string) error
}

// noLog is the metaLog of a driver without a recovery log: it records
// nothing.
type noLog struct{}

func (noLog) blockStored(context.Context, batch.BlockInfo, batch.Time) error { return nil }

func (noLog) batchAllocated(context.Context, batch.Time, []batch.BlockInfo, bool) error { return nil }

func (noLog) batchCompleted(context.Context, batch.Time) error { return nil }

func (noLog) batchSkipped(context.Context, batch.Time) error { return nil }

func (noLog) emptyRun(context.Context, batch.Time, time.Duration) error { return nil }

func (noLog) runCompleted(batch.Time) {}

func (noLog) shardFinished(context.Context, string, string) error { return nil }

// reserveAhead is how far past an empty batch's time a reservation of batch
// times reaches (recoverylog.BatchesReserved): an idle pipeline writes one
// entry per reserveAhead, or per batch if its interval is longer.
const reserveAhead = 10 * time.Second

// recoveryLog is the metaLog of a driver with a recovery log: each call is
// one Append but batchSkipped's, which appends only once in reserveAhead,
// and every compactEvery completed batches or reservations the log is
// compacted; in a pipeline with state, at the next snapshot entry
// (snapshotTaken), since the batches completed after the current snapshot
// are rewritten by a compaction (a restart replays them), and just after a
// snapshot there are none. A compaction waits for a snapshot up to
// another compactEvery batches (a snapshot that cannot be stored, an idle
// pipeline).
//
// A failed Append leaves the log in an unknown state (a prefix of the
// entries may be in it), so it is fatal to this writer: the first failure
// is latched, every later call returns it without touching the log, and
// fail is called so the Run stops. A restart recovers from what the log
// holds.
type recoveryLog struct {
	log          *recoverylog.Log
	compactEvery int
	fail         func(error)

	// toSnapshot is set, before the Run's goroutines start, when the
	// pipeline records state snapshots: compactions wait for one.
	toSnapshot bool

	mu       sync.Mutex
	broken   error
	done     int        // batches completed and reservations since the last compaction
	reserved batch.Time // batch times up to this one are reserved; batchSkipped only

	// The batch runner's, in a stateful pipeline: the last time of the
	// current run of empty batches (emptyRun), at first the last of the
	// runs the log held at open, whose pending batches the Run runs again;
	// and the last of a run's batches completed with no later entry saying
	// so (runCompleted), or 0.
	runThrough batch.Time
	runDone    batch.Time
	// inOrder is set when the batch runner logs the empty batches (a
	// stateful pipeline: see logEmpty), each once every batch before it
	// completed, which its reservations then say (BatchesReservedFrom).
	inOrder bool
	// inherited is the last batch time the log reserved at open: a crashed
	// Run's outputs may have seen the times up to it, which release never
	// gives back.
	inherited batch.Time
}

// lastRunThrough returns the last time of st's runs of empty batches, or 0.
func lastRunThrough(st *recoverylog.State) batch.Time {
	var t batch.Time
	for _, r := range st.Runs {
		t = max(t, r.Through)
	}
	return t
}

func (l *recoveryLog) append(ctx context.Context, entries ...recoverylog.Entry) error {
	if err := l.usable(); err != nil {
		return err
	}
	if err := l.log.Append(ctx, entries...); err != nil {
		l.failed(fmt.Errorf("recovery log: append %v: %w", entries[0], err))
		return err
	}
	return nil
}

// usable returns the error that broke the log, or nil.
func (l *recoveryLog) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.broken
}

// failed latches err and reports it through fail, once.
func (l *recoveryLog) failed(err error) {
	l.mu.Lock()
	first := l.broken == nil
	if first {
		l.broken = err
	}
	l.mu.Unlock()
	if first && l.fail != nil {
		l.fail(err)
	}
}

func (l *recoveryLog) blockStored(ctx context.Context, info batch.BlockInfo, t batch.Time) error {
	return l.append(ctx, recoverylog.BlockStoredIn(info, t))
}

// batchAllocated appends the allocation unless the blocks' entries made it.
// A failed append of one of those (latched, see append) may have left the
// block in the log, in the batch, although it is not in blocks: the batch
// must not run, since a restart would run it with the block.
//
// A batch of more than recoverylog.MaxAllocBlocks blocks, whose allocation
// entry could outgrow what a DynamoDB log stores in an item, is logged
// block by block instead (recoverylog.AllocatesByBlock), each entry durable
// before the next: a crash part way leaves the batch with some of its
// blocks, and the others unallocated, which is a batch that never ran.
func (l *recoveryLog) batchAllocated(ctx context.Context, t batch.Time, blocks []batch.BlockInfo, logged bool) error {
	if logged {
		return l.usable()
	}
	if !recoverylog.AllocatesByBlock(blocks) {
		return l.append(ctx, recoverylog.BatchAllocated(t, blockIDs(blocks)...))
	}
	for _, b := range blocks {
		if err := l.append(ctx, recoverylog.BlockStoredIn(b, t)); err != nil {
			return err
		}
	}
	return nil
}

func (l *recoveryLog) shardFinished(ctx context.Context, stream, shard string) error {
	return l.append(ctx, recoverylog.ShardFinished(stream, shard))
}

// batchSkipped reserves the batch times up to reserveAhead past t, unless t
// is reserved already. One goroutine calls it for batches in time order
// (the timer loop, or in a stateful pipeline the batch runner), after
// every batch time the log held at open (which is how recovered
// reservations are honoured), so one reservation covers the empty batches
// of the next reserveAhead.
func (l *recoveryLog) batchSkipped(ctx context.Context, t batch.Time) error {
	if t <= l.reserved {
		return l.usable() // as batchAllocated's: no block may be logged in it
	}
	through := t.Add(reserveAhead)
	e := recoverylog.BatchesReserved(through)
	if l.inOrder {
		e = recoverylog.BatchesReservedFrom(t, through)
	}
	if err := l.append(ctx, e); err != nil {
		return err
	}
	if l.inOrder {
		l.runDone = 0 // the entry says the batches before t completed
	}
	l.reserved = through
	return l.counted(ctx, t)
}

// emptyRun appends a run of empty batches from t through reserveAhead
// past it (recoverylog.EmptyRun), unless the current run holds t. The run's
// times are reserved too: batchSkipped writes nothing for a quiet batch in
// it, which a restart runs as an empty batch of the run.
func (l *recoveryLog) emptyRun(ctx context.Context, t batch.Time, every time.Duration) error {
	if t <= l.runThrough {
		return l.usable() // as batchAllocated's: no block may be logged in it
	}
	through := t.Add(reserveAhead)
	if err := l.append(ctx, recoverylog.EmptyRun(t, through, every)); err != nil {
		return err
	}
	l.runThrough, l.runDone = through, 0 // the run says the batches before t completed
	l.reserved = max(l.reserved, through)
	return l.counted(ctx, t)
}

// runCompleted notes the batch at t completed if the current run holds
// it: a quiet batch in it too (batchSkipped), which a restart would run
// again as one of the run's.
func (l *recoveryLog) runCompleted(t batch.Time) {
	if t <= l.runThrough {
		l.runDone = t
	}
}

// release gives back the batch times reserved after t, the last batch the
// Run cut, when it stops: no batch of it will use them, so a restart may
// start at the clock instead of after them (each restart of an idle
// pipeline would otherwise run its batch times up to reserveAhead further
// ahead of the clock). It records too that the empty batches of a run
// completed up to the last one that did (runCompleted), so that a restart
// does not run them again. It compacts the log if this Run reserved past t,
// completed such a batch or, snapped, ended with a state snapshot (which
// leaves nothing to replay: the compaction drops the batches completed
// before it), and does nothing otherwise. A failure is logged, not
// returned: the log is as it was, and a restart honours the reservation
// and runs those batches again.
func (l *recoveryLog) release(ctx context.Context, t batch.Time, snapped bool, logger *slog.Logger) {
	if (l.reserved <= t && l.runDone == 0 && !snapped) || l.usable() != nil {
		return
	}
	if err := l.log.CompactReleasing(ctx, t, l.runDone); err != nil {
		logger.Warn("stream: could not give back the batch times reserved in the recovery log; "+
			"the next Run's batches follow them, ahead of the clock", "reserved", l.reserved, "last", t, "err", err)
	}
}

// batchCompleted logs the completion; see counted.
func (l *recoveryLog) batchCompleted(ctx context.Context, t batch.Time) error {
	if err := l.append(ctx, recoverylog.BatchCompleted(t)); err != nil {
		return err
	}
	l.runDone = 0 // the batches before t completed
	return l.counted(ctx, t)
}

// snapshotTaken logs that the state after the batch at t is the snapshot
// ref names, then compacts the log if a compaction waits for it.
func (l *recoveryLog) snapshotTaken(ctx context.Context, t batch.Time, ref string) error {
	if err := l.append(ctx, recoverylog.SnapshotTaken(t, ref)); err != nil {
		return err
	}
	l.runDone = 0 // the batches up to t completed
	if l.due(0, l.compactEvery) {
		l.compact(ctx, t)
	}
	return nil
}

// counted counts an entry that compaction makes redundant (a completion, a
// reservation) and, every compactEvery of them, compacts the log, or with
// snapshots leaves it to the next one (see recoveryLog). A failed
// compaction stops the Run through fail but does not fail the batch at t,
// whose entry is logged.
func (l *recoveryLog) counted(ctx context.Context, t batch.Time) error {
	most := l.compactEvery
	if l.toSnapshot {
		most *= 2
	}
	if l.due(1, most) {
		l.compact(ctx, t)
	}
	return nil
}

// due counts add more entries and reports whether most or more were
// counted since the last compaction, and if so starts counting again.
func (l *recoveryLog) due(add, most int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done += add
	if l.done < most {
		return false
	}
	l.done = 0
	return true
}

// compact compacts the log after the batch at t.
func (l *recoveryLog) compact(ctx context.Context, t batch.Time) {
	if err := l.log.Compact(ctx); err != nil && ctx.Err() == nil {
		// The batch is complete (its completion is logged), so it is not
		// failed; but a log whose compaction failed may refuse appends (a
		// directory log) or have been taken over (a DynamoDB log): the Run
		// stops, and a restart recovers from what the log holds.
		l.failed(fmt.Errorf("recovery log: compact after batch %v: %w", t, err))
	}
}

// batchTags gives each pushed block the time of the batch it will be in,
// which its log entry records (recoverylog.BlockStoredIn), so that a batch
// of such blocks needs no allocation entry of its own: the log writes one
// entry per block and one per batch (its completion), not two per batch.
// The blocks pushed get the time of the next batch to cut; a cut moves them
// on to the batch after it, then waits for the pushes of its own time
// still logging, so that a batch holds exactly the blocks logged in it
// (take). Before the batch timer starts, while the recovered batches
// queue, blocks get no time, and their batch is allocated by an entry (as
// are the unallocated blocks a log recovered). It is safe for concurrent
// use.
type batchTags struct {
	mu      sync.Mutex
	open    batch.Time         // the time pushes get now; 0 before start
	pushing map[batch.Time]int // pushes under way, by their time
	left    chan struct{}      // closed, and replaced, when a push ends
}

// start gives the blocks pushed from now on the time t, the first batch
// the timer cuts.
func (g *batchTags) start(t batch.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = t
}

// enter returns the time of the block a push is about to log, counted as
// under way until leave.
func (g *batchTags) enter() batch.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != 0 {
		if g.pushing == nil {
			g.pushing = make(map[batch.Time]int)
		}
		g.pushing[g.open]++
	}
	return g.open
}

// enterOldest is enter for the oldest time a push is under way with, at
// most t: the cut of that batch, which waits for the pushes of its time,
// has not taken its blocks yet, and waits for this one too, until leave.
func (g *batchTags) enterOldest(t batch.Time) batch.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pt := range g.pushing {
		t = min(t, pt)
	}
	if g.pushing == nil {
		g.pushing = make(map[batch.Time]int)
	}
	g.pushing[t]++
	return t
}

// leave ends a push enter gave t, once its block is logged and waits for
// a batch, or failed.
func (g *batchTags) leave(t batch.Time) {
	if t == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pushing[t]--; g.pushing[t] == 0 {
		delete(g.pushing, t)
	}
	if g.left != nil {
		close(g.left)
		g.left = nil
	}
}

// cut gives the blocks pushed from now on the time next, then waits until
// no push given t is under way, or ctx is done.
func (g *batchTags) cut(ctx context.Context, t, next batch.Time) error {
	g.mu.Lock()
	g.open = next
	for g.pushing[t] > 0 {
		if g.left == nil {
			g.left = make(chan struct{})
		}
		left := g.left
		g.mu.Unlock()
		select {
		case <-left:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		g.mu.Lock()
	}
	g.mu.Unlock()
	return nil
}
