package kinesis

import (
	"cmp"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
)

// forgetShardAfter is how long a shard's state and counters are kept after
// its reader stopped and its assigner released it (a lease lost or handed
// off, a shard finished), once every record read from it is completed, or
// after a shard no reader reads here first showed (see progress.forget): long
// enough for metrics to show it not read, and for a lease lost and taken
// back to resume after what this worker read (run.doneUpTo); short enough
// that a stream resharded often does not grow the receiver's memory and
// metric series without bound.
const forgetShardAfter = 10 * time.Minute

// progress tracks, per shard, what was added to blocks and what was stored,
// and turns "read to the end" plus "all of it stored" into the drained
// signal children wait for. It is safe for concurrent use; it never calls
// out while holding its lock.
type progress struct {
	mu      sync.Mutex
	shards  map[string]*shardState
	changed chan struct{} // capacity 1: a wake-up for the assigner, never closed
}

// shardState is the tracked state of one shard.
type shardState struct {
	reading      bool
	recordsRead  int64
	millisBehind int64
	lastAdded    string // greatest sequence number added to a block, over every reader of the shard
	latestStored string // greatest sequence number whose block was stored
	completed    string // greatest sequence number whose block was completed
	ended        bool
	drained      bool
	drainedCh    chan struct{} // closed when drained becomes true
	stoppedAt    time.Time     // when its reader stopped; zero while one runs or before the first
	released     bool          // its assigner is done with it (see release)

	// pending counts the ranges added to blocks whose blocks are not
	// completed yet, over every reader of the shard. The greatest numbers
	// above cannot tell: a later hold of the shard's lease that reads from
	// a snapshot behind what an earlier hold read adds ranges at or below
	// them, which the earlier hold's completions seem to cover.
	pending int
}

// drainEvent says a shard became drained, with its greatest stored
// sequence number.
type drainEvent struct {
	shard   string
	lastSeq string
}

func newProgress() *progress {
	return &progress{shards: make(map[string]*shardState), changed: make(chan struct{}, 1)}
}

// stateLocked returns the state of shard, creating it.
func (p *progress) stateLocked(shard string) *shardState {
	st, ok := p.shards[shard]
	if !ok {
		st = &shardState{drainedCh: make(chan struct{})}
		p.shards[shard] = st
	}
	return st
}

// notify wakes the assigner without blocking.
func (p *progress) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// started marks a reader of shard as running. A shard read again after it
// drained (a lease taken back) starts a new end-of-shard cycle.
func (p *progress) started(shard string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stateLocked(shard)
	st.reading = true
	st.stoppedAt, st.released = time.Time{}, false
	if st.drained || st.ended {
		st.ended, st.drained = false, false
		st.drainedCh = make(chan struct{})
	}
}

// stopped marks the reader of shard as gone, at now.
func (p *progress) stopped(shard string, now time.Time) {
	p.mu.Lock()
	st := p.stateLocked(shard)
	st.reading = false
	st.stoppedAt = now
	p.mu.Unlock()
	p.notify()
}

// release records that the assigner is done with shard, whose reader
// stopped or is stopping: nothing will ask for its state again unless a
// reader of it starts again (started), so forget may drop it once the
// reader stopped. A shard not tracked is ignored.
func (p *progress) release(shard string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.shards[shard]; ok {
		st.released = true
	}
}

// letGo records that the assigner let shard's lease go at now, handed
// back or lost (see release). A shard no reader read since it was last
// forgotten, its lease let go before a reader started, is tracked from now
// as one whose reader stopped then, so that forget drops it, with its count
// of leases handed back and its checkpointer entry, as it drops a shard
// that was read.
func (p *progress) letGo(shard string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stateLocked(shard)
	if !st.reading && st.stoppedAt.IsZero() {
		st.stoppedAt = now
	}
	st.released = true
}

// forget drops the state of every released shard whose reader stopped at
// least after before now and whose records added to blocks are all
// completed (none is on its way, and a shard at its end was drained), and
// returns their IDs. A completion that comes later for one of them tracks
// it again, as a new shard. A shard no reader read since it was tracked,
// and no assigner holds, is known from completions alone (blocks the
// recovery log recovered for a shard this worker does not read): the first
// call that sees it takes it as released then, so that it is dropped after
// too rather than kept for good; a reader that starts on it meanwhile
// (started) keeps it.
func (p *progress) forget(now time.Time, after time.Duration) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for id, st := range p.shards {
		if !st.reading && st.stoppedAt.IsZero() && !st.released {
			st.stoppedAt, st.released = now, true
		}
		switch {
		case !st.released || st.reading || st.stoppedAt.IsZero() || now.Sub(st.stoppedAt) < after,
			st.ended && !st.drained,
			!st.allCompleted():
			continue
		}
		delete(p.shards, id)
		ids = append(ids, id)
	}
	return ids
}

// track makes the shard of each range known, if it is not: a shard whose
// per-shard counters were counted outside its progress (Recompute) is then
// forgotten with them (see forget).
func (p *progress) track(ranges []batch.SeqRange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range ranges {
		p.stateLocked(r.Shard)
	}
}

// added records that a range of shard entered a block; adding counted it
// pending before, since the block may complete before added runs.
func (p *progress) added(r batch.SeqRange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stateLocked(r.Shard)
	st.lastAdded = batch.MaxSeq(st.lastAdded, r.Last)
	st.recordsRead += int64(r.Count)
}

// adding counts a range of shard about to enter a block as pending: before
// the block is added, since it may be sealed, pushed and completed before
// the reader records it added (a completion found nothing pending then,
// and the range stayed pending for good).
func (p *progress) adding(shard string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stateLocked(shard).pending++
}

// notAdded undoes adding for a range that did not enter a block.
func (p *progress) notAdded(shard string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stateLocked(shard)
	st.pending = max(st.pending-1, 0)
}

// behind records the MillisBehindLatest of shard's latest read.
func (p *progress) behind(shard string, millis int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stateLocked(shard).millisBehind = millis
}

// stored advances each range's shard to the range's Last, and returns the
// shards that became drained.
func (p *progress) stored(ranges []batch.SeqRange) []drainEvent {
	p.mu.Lock()
	var events []drainEvent
	for _, r := range ranges {
		st := p.stateLocked(r.Shard)
		st.latestStored = batch.MaxSeq(st.latestStored, r.Last)
		if ev, ok := p.drainLocked(r.Shard, st); ok {
			events = append(events, ev)
		}
	}
	p.mu.Unlock()
	if len(events) > 0 {
		p.notify()
	}
	return events
}

// completed advances each range's shard's completed number to the range's
// Last: it only ever moves forward. It reports whether any moved. A range
// of a block the recovery log held uncompleted at Start was never added:
// its shard's pending count stays at zero rather than go below, and the
// greatest numbers, which this run's ranges all exceed, keep the shard
// from looking completed too early (see allCompleted).
func (p *progress) completed(ranges []batch.SeqRange) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	moved := false
	for _, r := range ranges {
		st := p.stateLocked(r.Shard)
		st.pending = max(st.pending-1, 0)
		if st.completed == "" || batch.CompareSeq(r.Last, st.completed) > 0 {
			st.completed = r.Last
			moved = true
		}
	}
	return moved
}

// allCompleted reports whether every range added to a block of st's shard
// is completed: none is pending, and the greatest completed number reaches
// the greatest added.
func (st *shardState) allCompleted() bool {
	return st.lastAdded == "" || st.pending == 0 && st.completed != "" && batch.CompareSeq(st.completed, st.lastAdded) >= 0
}

// pendingRanges returns how many ranges of shard were added to blocks not
// completed yet, for the warning of a shard that waits for them.
func (p *progress) pendingRanges(shard string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.shards[shard]; ok {
		return st.pending
	}
	return 0
}

// allCompleted reports whether every range of shard added to a block is
// completed, over every reader of the shard (every hold of its lease).
func (p *progress) allCompleted(shard string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.shards[shard]
	return !ok || st.allCompleted()
}

// seq returns field of shard's state, and whether it is set.
func (p *progress) seq(shard string, field func(*shardState) string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.shards[shard]
	if !ok || field(st) == "" {
		return "", false
	}
	return field(st), true
}

// latestAdded returns the greatest sequence number of shard added to a
// block.
func (p *progress) latestAdded(shard string) (string, bool) {
	return p.seq(shard, func(st *shardState) string { return st.lastAdded })
}

// latestCompleted returns the greatest completed sequence number of shard.
func (p *progress) latestCompleted(shard string) (string, bool) {
	return p.seq(shard, func(st *shardState) string { return st.completed })
}

// ended records that a reader of shard reached the shard's end, and
// reports whether that made the shard drained.
func (p *progress) ended(shard string) (drainEvent, bool) {
	p.mu.Lock()
	st := p.stateLocked(shard)
	st.ended = true
	ev, ok := p.drainLocked(shard, st)
	p.mu.Unlock()
	if ok {
		p.notify()
	}
	return ev, ok
}

// drainLocked marks st drained if it ended and everything added is stored.
func (p *progress) drainLocked(shard string, st *shardState) (drainEvent, bool) {
	if !st.ended || st.drained {
		return drainEvent{}, false
	}
	if st.lastAdded != "" && batch.CompareSeq(st.latestStored, st.lastAdded) < 0 {
		return drainEvent{}, false
	}
	st.drained = true
	close(st.drainedCh)
	return drainEvent{shard: shard, lastSeq: st.latestStored}, true
}

// drained returns a channel closed once shard is drained.
func (p *progress) drained(shard string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stateLocked(shard).drainedCh
}

// latestStored returns the greatest stored sequence number of shard.
func (p *progress) latestStored(shard string) (string, bool) {
	return p.seq(shard, func(st *shardState) string { return st.latestStored })
}

// snapshot returns the state of every shard.
func (p *progress) snapshot() map[string]ShardStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]ShardStats, len(p.shards))
	for id, st := range p.shards {
		out[id] = ShardStats{
			Reading:            st.reading,
			RecordsRead:        st.recordsRead,
			MillisBehindLatest: st.millisBehind,
			LastAdded:          st.lastAdded,
			LatestCompleted:    st.completed,
			Ended:              st.ended,
			Drained:            st.drained,
		}
	}
	return out
}

// forgetShards drops the state and counters of the shards released at
// least forgetShardAfter before now whose records are all completed (see
// progress.forget): in the receiver's progress and stats, and in its
// Checkpointer's and lease Coordinator's counters.
func (r *Receiver) forgetShards(now time.Time) {
	ids := r.progress.forget(now, cmp.Or(r.cfg.forgetAfter, forgetShardAfter))
	if len(ids) == 0 {
		return
	}
	r.stats.forget(ids)
	if lr := r.lease.Load(); lr != nil {
		lr.cp.Forget(ids...)
		lr.coord.ForgetGiven(ids...)
	}
}
