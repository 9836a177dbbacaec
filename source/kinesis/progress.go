package kinesis

import (
	"sync"

	"github.com/weirstream/weir/batch"
)

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
	if st.drained || st.ended {
		st.ended, st.drained = false, false
		st.drainedCh = make(chan struct{})
	}
}

// stopped marks the reader of shard as gone.
func (p *progress) stopped(shard string) {
	p.mu.Lock()
	st := p.stateLocked(shard)
	st.reading = false
	p.mu.Unlock()
	p.notify()
}

// added records that a range of shard entered a block.
func (p *progress) added(r batch.SeqRange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stateLocked(r.Shard)
	st.lastAdded = batch.MaxSeq(st.lastAdded, r.Last)
	st.recordsRead += int64(r.Count)
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
// Last: it only ever moves forward. It reports whether any moved.
func (p *progress) completed(ranges []batch.SeqRange) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	moved := false
	for _, r := range ranges {
		st := p.stateLocked(r.Shard)
		if st.completed == "" || batch.CompareSeq(r.Last, st.completed) > 0 {
			st.completed = r.Last
			moved = true
		}
	}
	return moved
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
