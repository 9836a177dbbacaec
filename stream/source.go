package stream

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source"
)

// sourceRunner is the untyped view the engine has of a source.
type sourceRunner interface {
	// bind attaches the source to the engine of a Run, before any goroutine
	// starts.
	bind(e *engine)
	// start runs the receiver's Start until it returns.
	start(ctx context.Context, e *engine) error
	// stop asks the receiver to stop gracefully and waits for it.
	stop(ctx context.Context) error
	// take returns the stored blocks of the batch at t not yet in a batch,
	// in block order, and marks them batched: those pushed for t or before
	// (batchTags), and those pushed with no time, which it reports, as their
	// log entries do not allocate them.
	take(t batch.Time) (blocks []batch.BlockInfo, untimed bool)
	// unbatched returns the number of stored blocks not yet in a batch.
	unbatched() int
	// stored returns the number of blocks stored and not yet completed, and
	// of records in them.
	stored() (blocks, records int)
	// complete tells the receiver that blocks are processed and drops
	// their records from the store; an error is a hook's panic.
	complete(ctx context.Context, blocks []batch.BlockInfo) error
	// resume continues the block numbering at next and makes blocks, read
	// from the recovery log, wait for the next batch; called before start.
	resume(next uint64, blocks []batch.BlockInfo)
	// observe reports a completed batch to the receiver's
	// source.BatchObservers; an error is a hook's panic.
	observe(ctx context.Context, info BatchInfo) error
	// rebuild recomputes a block the store lost (see recompute), without
	// telling the listeners: its records and the block are a rebuilt[T],
	// the records holding about bytes of memory (recordSizer).
	rebuild(ctx context.Context, info batch.BlockInfo) (recs any, bytes int64, err error)
	// graphNode returns the source's stream in the graph.
	graphNode() *node
	// receiver returns the source's receiver.
	receiver() any
	// component describes the source in the pipeline's shape.
	component() recovery.Component
}

// From returns the stream of the records r receives. The Pipeline starts r
// when Run is called and gives it a source.Runtime whose Push stores blocks
// in this source's block store. Sources are numbered in From call order,
// from 0; that index is the Source of their block IDs. Named, among opts,
// names the source in the pipeline's shape (see Describer).
func From[T any](p *Pipeline, r source.Receiver[T], opts ...Option) *Stream[T] {
	mustExist("From", "p", p)
	s := &sourceState[T]{r: r, opts: applyOptions(opts), space: make(chan struct{}), size: sizerOf(reflect.TypeFor[T](), 0)}
	p.mu.Lock()
	s.idx = len(p.sources)
	p.sources = append(p.sources, s)
	p.mu.Unlock()
	if nilReceiver(r) {
		p.graphError(fmt.Errorf("From: source %d: receiver is nil: pass a source.Receiver", s.idx))
	} else if i := p.sourceOf(r, s.idx); i >= 0 {
		p.graphError(fmt.Errorf("From: source %d: its receiver is source %d's too: a receiver is started once, by one From; "+
			"use the stream source %d's From returned (several operators may read one stream), or give this From a receiver of its own", s.idx, i, i))
	}
	st := newPlanned(p, fmt.Sprintf("From(source %d)", s.idx), p.cfg.BatchInterval, nil, s.partsAt)
	s.n = st.n
	s.n.partitioned = s.opts.partitioned
	s.opts.refuseOthers(p, st.n.op, sourceOptions)
	return st
}

// sourceOf returns the index of the source before source idx whose
// receiver is r, or -1. Receivers of a type that cannot be compared are
// never found.
func (p *Pipeline) sourceOf(r any, idx int) int {
	if !reflect.TypeOf(r).Comparable() {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, s := range p.sources[:idx] {
		if o := s.receiver(); reflect.TypeOf(o) == reflect.TypeOf(r) && o == r {
			return i
		}
	}
	return -1
}

// sourceState is one source: its receiver, its block store, and the blocks
// stored but not yet in a batch.
type sourceState[T any] struct {
	idx   int
	r     source.Receiver[T]
	opts  options
	n     *node // the source's stream
	size  recordSizer
	store blockStore[T]
	e     *engine // set by bind

	mu       sync.Mutex
	nextSeq  uint64
	pending  []batch.BlockInfo // stored, not yet in a batch
	times    []batch.Time      // by pending's index: the batch its entry logged it in, or 0
	reserved int               // pushes past the limit check, not yet stored
	space    chan struct{}     // closed (and replaced) by take
	// completedRecords is the record count of the blocks the last
	// complete was given; the batch runner sets it, then reports the
	// batch to the observers (observe), one batch at a time.
	completedRecords int

	// hooksMu is held while the receiver's hooks are called, so that they
	// are called one at a time and in order (see register).
	hooksMu sync.Mutex
	// Guarded by mu: the receiver's hooks (the receiver itself, if it is
	// one, and those it registered with Runtime.Observe), and, until its
	// first push or the end of its Start, the blocks completed so far, for
	// the hooks it registers meanwhile (see register).
	completers []source.CompletionObserver
	observers  []source.BatchObserver
	held       [][]batch.BlockInfo
	holding    bool

	// adopting is held (a token in it) by the push logging the blocks
	// logged in no batch in its own (adopt), from when it collects them
	// until their entries are durable: a push of a later batch waits for
	// it rather than logging them in its own too.
	adopting chan struct{}
}

func (s *sourceState[T]) bind(e *engine) {
	s.e = e
	s.completers, s.observers, s.held, s.holding = nil, nil, nil, true
	s.adopting = make(chan struct{}, 1)
	s.addHook(s.r)
}

// addHook adds hook to the completers and observers it is one of; s.mu is
// held or no goroutine runs yet.
func (s *sourceState[T]) addHook(hook any) (source.CompletionObserver, bool) {
	if o, ok := hook.(source.BatchObserver); ok {
		s.observers = append(s.observers, o)
	}
	c, ok := hook.(source.CompletionObserver)
	if ok {
		s.completers = append(s.completers, c)
	}
	return c, ok
}

// register is the receiver's Runtime.Observe: it adds hook, and reports
// to it the blocks completed before, which are those of batches recovered
// from the log when the receiver registers before its first push, as
// Runtime.Observe asks. A receiver's completion bookkeeping (a Kinesis
// shard's end waits for the completion of the blocks the log held) then
// misses none of them, although the batch runner and Start run at once.
func (s *sourceState[T]) register(hook any) {
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	s.mu.Lock()
	c, ok := s.addHook(hook)
	held := s.held
	s.mu.Unlock()
	if !ok {
		return
	}
	for _, blocks := range held {
		c.BlocksCompleted(s.e.ctx, blocks)
	}
}

// stopHolding ends the keeping of completed blocks for register: at the
// receiver's first push, or when its Start returned.
func (s *sourceState[T]) stopHolding() {
	s.mu.Lock()
	s.holding, s.held = false, nil
	s.mu.Unlock()
}

// observe tells the receiver's source.BatchObservers about a batch that
// completed: called by the batch runner right after the batch, on its
// goroutine, so the receiver's rate follows the batches in order.
func (s *sourceState[T]) observe(ctx context.Context, info BatchInfo) error {
	if info.Err != nil {
		return nil
	}
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	s.mu.Lock()
	observers := s.observers
	s.mu.Unlock()
	report := source.BatchReport{
		Time: info.Time.Std(), Interval: s.e.cfg.BatchInterval, Records: s.completedRecords,
		SchedulingDelay: info.SchedulingDelay, ProcessingTime: info.ProcessingTime,
	}
	for _, o := range observers {
		if err := receiverCall("BatchCompleted", func() error { o.BatchCompleted(ctx, report); return nil }); err != nil {
			return err
		}
	}
	return nil
}

func (s *sourceState[T]) receiver() any {
	if nilReceiver(s.r) {
		return nil // a graph error (From): not asked anything
	}
	return s.r
}

// nilReceiver reports whether r is nil, or a nil pointer (what a program
// that dropped the error of a receiver's constructor passes).
func nilReceiver(r any) bool {
	v := reflect.ValueOf(r)
	return r == nil || v.Kind() == reflect.Pointer && v.IsNil()
}

func (s *sourceState[T]) graphNode() *node { return s.n }

func (s *sourceState[T]) component() recovery.Component { return describeSource(s.r, s.opts) }

func (s *sourceState[T]) resume(next uint64, blocks []batch.BlockInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextSeq = next
	s.pending = append(s.pending, blocks...)
	s.times = append(s.times, make([]batch.Time, len(blocks))...)
}

func (s *sourceState[T]) start(ctx context.Context, e *engine) error {
	logger := e.cfg.Logger.With("source", s.idx)
	rt := source.Runtime[T]{
		ResumeAfter:      e.forSource(s.idx, e.resumeAfter),
		Uncompleted:      e.forSource(s.idx, e.uncompleted),
		ShardFinished:    e.shardFinished(),
		Source:           s.idx,
		Push:             s.push,
		BlockInterval:    e.cfg.BlockInterval,
		BatchInterval:    e.cfg.BatchInterval,
		MaxBufferedBytes: e.bufferShare(),
		Clock:            e.cfg.Clock,
		Logger:           logger,
		ReportError: func(err error) {
			logger.Warn("stream: receiver error", "err", err)
			e.emit(func(l Listener) { l.ReceiverError(ReceiverInfo{Source: s.idx, Err: err}) })
		},
		Observe: s.register,
	}
	if e.shardStates != nil && e.shardStates[s.idx] != nil {
		rt.ShardState = e.shardStates[s.idx]
	}
	rt.LoggedUntil = e.loggedUntil()
	defer s.stopHolding()
	return s.r.Start(ctx, rt)
}

// bufferShare is what each source's receiver may hold of the pipeline's
// memory budget (Config.MaxBufferedBytes): an equal share, or -1 for no
// limit.
func (e *engine) bufferShare() int64 {
	if e.cfg.MaxBufferedBytes < 0 || len(e.sources) == 0 {
		return e.cfg.MaxBufferedBytes
	}
	return max(e.cfg.MaxBufferedBytes/int64(len(e.sources)), 1)
}

func (s *sourceState[T]) stop(ctx context.Context) error { return s.r.Stop(ctx) }

// push is the source's source.PushFunc: it waits for room (backpressure),
// stores the block, logs it in the batch it will be in (batchTags), and
// only then makes it visible to the batch cutter and returns.
func (s *sourceState[T]) push(ctx context.Context, b source.Block[T]) (batch.BlockInfo, error) {
	s.stopHolding()
	for _, r := range b.Ranges {
		if err := s.e.readsShard(s.idx, r.Stream, r.Shard); err != nil {
			s.e.fail(err)
			return batch.BlockInfo{}, err
		}
	}
	if err := s.reserve(ctx); err != nil {
		return batch.BlockInfo{}, err
	}
	s.mu.Lock()
	id := batch.BlockID{Source: s.idx, Seq: s.nextSeq}
	s.nextSeq++
	s.mu.Unlock()

	info := batch.BlockInfo{ID: id, Ranges: b.Ranges, Count: len(b.Records)}
	s.store.Put(id, b.Records)
	t := s.e.tags.enter()
	defer s.e.tags.leave(t)
	err := s.adopt(ctx, t)
	if err == nil {
		if err = s.e.log.blockStored(ctx, info, t); err != nil {
			err = fmt.Errorf("log %v: %w", id, err)
		}
	}
	if err != nil {
		s.store.Delete(id)
		s.mu.Lock()
		s.reserved--
		s.mu.Unlock()
		return batch.BlockInfo{}, err
	}
	s.mu.Lock()
	s.reserved--
	s.pending = append(s.pending, info)
	s.times = append(s.times, t)
	s.mu.Unlock()
	return info, nil
}

// adopt logs in the batch at t, the batch a push is about to log its block
// in, the blocks waiting for a batch that are logged in none: those the
// recovery log held unallocated (resume) and those pushed before the batch
// timer gave pushes a time. They were stored before the push's block, and
// the cut of the batch at t would take them with it, but only its
// allocation entry would say so: a crash after the push's entry and before
// that allocation would leave the batch at t, in the log, with the push's
// block and not them, and a restart would recompute it so and put them in
// the next batch, after newer records of their shards. Logged in the batch
// first, they are in it whenever the push's block is. Only the pushes made
// before the timer started are logged in no batch, and a BlockGenerator
// pushes one block at a time, so none of its blocks logged in no batch is
// stored after one logged in a batch (blocks pushed concurrently have no
// order between them: source.Runtime.Push).
//
// A push takes its blocks from the cut's reach as it finds them: it gives
// them its time under the lock the cut takes them with, so each is in the
// batch of its push's entry or, found first by the cut of an earlier batch,
// in that batch's allocation entry, never in both (a restart refuses a
// block in two batches); a failed entry gives them no time again, and the
// cut of t, which waits for this push, allocates them. Pushes adopt one at
// a time (adopting), and every push of a time waits for the one adopting:
// none logs its own block, in t or a later batch, before the blocks it
// adopted are durable in t.
//
// The batch they are logged in is not the push's own but the oldest one a
// push is still under way for (batchTags.enterOldest), which this push
// then holds open too: a push of an older batch, given its time before the
// cut of that batch and not yet adopting, may be of the next block of one
// of their shards, which must not be in an earlier batch than they are.
func (s *sourceState[T]) adopt(ctx context.Context, t batch.Time) error {
	if t == 0 {
		return nil
	}
	select {
	case s.adopting <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.adopting }()
	s.mu.Lock()
	untimed := slices.Contains(s.times, 0)
	s.mu.Unlock()
	if !untimed {
		return nil
	}
	t = s.e.tags.enterOldest(t)
	defer s.e.tags.leave(t)
	var blocks []batch.BlockInfo
	s.mu.Lock()
	for i, bt := range s.times {
		if bt == 0 {
			s.times[i] = t
			blocks = append(blocks, s.pending[i])
		}
	}
	s.mu.Unlock()
	for _, b := range blocks {
		if err := s.e.log.blockStored(ctx, b, t); err != nil {
			s.mu.Lock()
			for _, b := range blocks {
				if i := slices.IndexFunc(s.pending, func(p batch.BlockInfo) bool { return p.ID == b.ID }); i >= 0 && s.times[i] == t {
					s.times[i] = 0
				}
			}
			s.mu.Unlock()
			return fmt.Errorf("log %v, stored before the batch timer started, in batch %v: %w", b.ID, t, err)
		}
	}
	return nil
}

// reserve waits until the source has fewer than maxUnbatchedBlocks blocks
// stored or being stored and not yet in a batch, and takes a slot.
func (s *sourceState[T]) reserve(ctx context.Context) error {
	if s.e.ctx.Err() != nil {
		return fmt.Errorf("push: %w", source.ErrStopped)
	}
	for {
		s.mu.Lock()
		if len(s.pending)+s.reserved < s.e.cfg.maxUnbatchedBlocks {
			s.reserved++
			s.mu.Unlock()
			return nil
		}
		space := s.space
		s.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.e.ctx.Done():
			return fmt.Errorf("push: %w", source.ErrStopped)
		}
	}
}

func (s *sourceState[T]) take(t batch.Time) (blocks []batch.BlockInfo, untimed bool) {
	s.mu.Lock()
	var later []batch.BlockInfo
	var laterTimes []batch.Time
	for i, b := range s.pending {
		switch bt := s.times[i]; {
		case bt > t: // pushed for a later batch while this one was cut
			later, laterTimes = append(later, b), append(laterTimes, bt)
		default:
			blocks = append(blocks, b)
			untimed = untimed || bt != t
		}
	}
	s.pending, s.times = later, laterTimes
	close(s.space)
	s.space = make(chan struct{})
	s.mu.Unlock()
	slices.SortFunc(blocks, func(a, b batch.BlockInfo) int { return a.ID.Compare(b.ID) })
	return blocks, untimed
}

func (s *sourceState[T]) unbatched() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) + s.reserved
}

func (s *sourceState[T]) stored() (blocks, records int) { return s.store.Len() }

// complete reports blocks, those of a completed batch, to the receiver's
// hooks, and lets go of them. A hook that panics (a bug of the receiver,
// whose bookkeeping is then in doubt) fails with an error naming it.
func (s *sourceState[T]) complete(ctx context.Context, blocks []batch.BlockInfo) error {
	s.completedRecords = 0
	for _, b := range blocks {
		s.completedRecords += b.Count
	}
	if len(blocks) == 0 {
		return nil
	}
	if err := s.completed(ctx, blocks); err != nil {
		return err
	}
	s.store.Delete(blockIDs(blocks)...)
	return nil
}

// completed calls the receiver's completion hooks with blocks, one hook
// at a time (hooksMu).
func (s *sourceState[T]) completed(ctx context.Context, blocks []batch.BlockInfo) error {
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	s.mu.Lock()
	completers := s.completers
	if s.holding {
		s.held = append(s.held, blocks)
	}
	s.mu.Unlock()
	for _, c := range completers {
		if err := receiverCall("BlocksCompleted", func() error { c.BlocksCompleted(ctx, blocks); return nil }); err != nil {
			return err
		}
	}
	return nil
}

// blockIDs returns the IDs of blocks, in order.
func blockIDs(blocks []batch.BlockInfo) []batch.BlockID {
	ids := make([]batch.BlockID, len(blocks))
	for i, b := range blocks {
		ids[i] = b.ID
	}
	return ids
}

// partsAt is the plan of the source's stream: the records of the batch's
// blocks of this source (see records), as partitions (see shardParts). The
// batch, as ForEachBatch sees it, has one part per block, in block order.
func (s *sourceState[T]) partsAt(r *run) (*parted[T], error) {
	recs, infos, err := s.records(r, r.job.blocks[s.idx])
	if err != nil {
		return nil, err
	}
	keys, npos, data := shardParts(infos, recs)
	pt := computed(r.job.time, infos, keys, npos, data)
	pt.whole = batch.New(r.job.time, infos, recs...) // one part per block
	pt.ranged = true
	if _, ok := any((*T)(nil)).(source.Positioned); ok {
		pt.trace = new(atomic.Pointer[tracer])
	}
	return pt, nil
}

// records returns the records of the blocks infos of the batch r runs, in
// block order: read from the store or, for a block the store lost,
// recomputed by the receiver. The blocks of a recovered batch are
// recomputed ahead by the prefetcher; the others now, at most Parallelism
// at a time. The first failure, in block order for a recovered batch, fails
// the batch. It returns the blocks as their records are: without the
// ranges a receiver left out of a recomputed block (see recompute).
func (s *sourceState[T]) records(r *run, infos []batch.BlockInfo) ([][]T, []batch.BlockInfo, error) {
	recs := make([][]T, len(infos))
	shown := infos // copied before a block is changed
	var lost []int
	for i, info := range infos {
		if rs, ok := s.store.Get(info.ID); ok {
			recs[i] = rs
		} else {
			lost = append(lost, i)
		}
	}
	if r.job.ahead != nil && r.job.ahead[s.idx] != nil {
		ahead := r.job.ahead[s.idx]
		for _, i := range lost {
			f := ahead[i]
			select {
			case <-f.done:
			case <-r.ctx.Done():
				return nil, nil, context.Cause(r.ctx)
			}
			if f.err != nil {
				return nil, nil, s.recomputeFailed(f.err)
			}
			rc := f.recs.(rebuilt[T])
			recs[i] = rc.recs
			shown = changeBlock(shown, infos, i, rc.info)
			s.skipped(rc.skipped)
		}
		return recs, shown, nil
	}
	got := make([]batch.BlockInfo, len(lost))
	err := parallel(r.ctx, r.par, len(lost), func(ctx context.Context, k int) error {
		i := lost[k]
		rc, err := s.recompute(ctx, infos[i])
		if err != nil {
			return s.recomputeFailed(err)
		}
		recs[i], got[k] = rc.recs, rc.info
		s.skipped(rc.skipped)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for k, i := range lost {
		shown = changeBlock(shown, infos, i, got[k])
	}
	return recs, shown, nil
}

// changeBlock returns shown, a copy of infos once one of its blocks
// differs, with block i set to info.
func changeBlock(shown, infos []batch.BlockInfo, i int, info batch.BlockInfo) []batch.BlockInfo {
	if info.Count == shown[i].Count && len(info.Ranges) == len(shown[i].Ranges) {
		return shown
	}
	if &shown[0] == &infos[0] {
		shown = slices.Clone(infos)
	}
	shown[i] = info
	return shown
}

// rebuilt is a block the receiver recomputed: its records, and the
// block as they are (see recompute).
type rebuilt[T any] struct {
	recs []T
	info batch.BlockInfo
	// skipped is the receiver's *source.RangesSkippedError, if it left
	// ranges out; reported (see sourceState.skipped) when the batch uses
	// the block.
	skipped error
}

func (s *sourceState[T]) rebuild(ctx context.Context, info batch.BlockInfo) (any, int64, error) {
	rc, err := s.recompute(ctx, info)
	return rc, bytesOf(rc.recs, s.size), err
}

// recompute asks the receiver for the records of a block the store lost,
// and checks that it gave as many as the block had. A receiver that left
// out some of the block's ranges on purpose (*source.RangesSkippedError)
// gives a block without them, if the records it gave add up to the other
// ranges' counts; it has reported why.
func (s *sourceState[T]) recompute(ctx context.Context, info batch.BlockInfo) (rebuilt[T], error) {
	recs, err := s.r.Recompute(ctx, info)
	var skipped *source.RangesSkippedError
	var left error
	if errors.As(err, &skipped) {
		if without, ok := withoutRanges(info, skipped.Ranges); ok {
			info, err, left = without, nil, err
		} else {
			err = fmt.Errorf("the receiver left out ranges %v, which the block does not have: %w", skipped.Ranges, err)
		}
	}
	if err == nil && len(recs) != info.Count {
		err = fmt.Errorf("got %d records, the block had %d", len(recs), info.Count)
	}
	if err != nil {
		return rebuilt[T]{}, fmt.Errorf("source %d: recompute %v: %w", s.idx, info.ID, err)
	}
	return rebuilt[T]{recs, info, left}, nil
}

// skipped reports a receiver's *source.RangesSkippedError (nil: none) to
// the listeners and the log: records of a recomputed block were left out.
func (s *sourceState[T]) skipped(err error) {
	if err == nil {
		return
	}
	s.e.cfg.Logger.Warn("stream: records left out of a recomputed block: the receiver skipped ranges it can no longer read", "source", s.idx, "err", err)
	s.e.emit(func(l Listener) { l.ReceiverError(ReceiverInfo{Source: s.idx, Err: err}) })
}

// withoutRanges returns info without its ranges at the indexes skip
// (ascending), their records subtracted from its Count. It returns false
// if skip names a range info does not have, or one twice.
func withoutRanges(info batch.BlockInfo, skip []int) (batch.BlockInfo, bool) {
	out := info
	out.Ranges = make([]batch.SeqRange, 0, len(info.Ranges))
	next := 0
	for i, rg := range info.Ranges {
		if next < len(skip) && skip[next] == i {
			next++
			out.Count -= rg.Count
			continue
		}
		out.Ranges = append(out.Ranges, rg)
	}
	return out, next == len(skip) && out.Count >= 0
}

// recomputeFailed tells the listeners that recompute failed with err, when
// the batch needing the block gets to it, and returns err as a
// *recomputeError.
func (s *sourceState[T]) recomputeFailed(err error) error {
	s.e.emit(func(l Listener) { l.ReceiverError(ReceiverInfo{Source: s.idx, Err: err}) })
	return &recomputeError{err}
}

// recomputeError is a receiver's failure to recompute a block: the
// receiver's to retry (the Kinesis receiver does), not an output's failure,
// so an output's failure policy neither tries it again nor quarantines.
type recomputeError struct{ err error }

func (e *recomputeError) Error() string { return e.err.Error() }
func (e *recomputeError) Unwrap() error { return e.err }
