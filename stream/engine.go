package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
)

// engine is one Run of a Pipeline: a snapshot of the graph and the
// goroutines that run it.
//
// Goroutines, all owned by runGraph's WaitGroup: one per receiver (Start),
// the batch timer (queues the recovered batches, cuts batches, sole closer
// of jobs), the batch runner (runs jobs in order), the drainer (stops
// receivers on a drain) and, after a restart, the prefetcher (recomputes
// the recovered batches' blocks, see prefetcher). A goroutine that fails
// cancels the Run's context with its error as the cause (fail), which
// stops the others.
type engine struct {
	cfg     Config
	ctx     context.Context         // the Run's context: done when the Run stops
	cancel  context.CancelCauseFunc // cancels ctx; the first cause is kept
	sources []sourceRunner
	outputs []*output
	// quarantiners are the keyed, window, state and Transform operators
	// with Quarantine, counted as outputs after the outputs (keyedDead.out).
	quarantiners []*keyedDead
	ticks        []*node // stateful nodes an output depends on, parents first
	nodes        int
	shared       []bool // by node id: consumed by more than one node or output
	used         []bool // by node id: an output depends on it
	shape        recovery.Shape
	log          metaLog
	tags         batchTags // the batch each block pushed is logged in
	jobs         chan *job

	// Set by resume when a recovery log is open, before any goroutine.
	recovered []*job     // batches allocated and not completed, in time order
	last      batch.Time // greatest logged batch time, if hasLast
	hasLast   bool
	// resumed are the blocks stored and in no batch when the log was
	// read, which an earlier Run's receivers read; the timer loop's once
	// it runs, which drops them as it cuts them.
	resumed map[batch.BlockID]bool
	// lastReserved is set when last is the end of a reservation of batch
	// times (an idle pipeline's, see reserveAhead) rather than a batch's.
	lastReserved bool
	// lastDone is the greatest time of a batch the log holds completed,
	// or in its snapshot, if hasDone.
	lastDone batch.Time
	hasDone  bool
	// lastCut is the time of the last batch the timer cut, 0 before the
	// first; the timer loop's, read when the Run's goroutines are done.
	lastCut batch.Time
	// lastRan is the time of the last batch the batch runner ran to the
	// end (replayed, skipped or completed), 0 before the first; the batch
	// runner's, read when the Run's goroutines are done.
	lastRan     batch.Time
	resumeAfter func(stream, shard string) (string, bool)
	uncompleted func(stream, shard string) (string, bool)

	// With a recovery log, the source that reads each shard (readsShard).
	shardsMu   sync.Mutex
	shardReads map[recoverylog.ShardKey]int

	state *stateKeeper // set by openState with a recovery log and stateful operators
	pre   *prefetcher  // set by runGraph when recovered batches have blocks to recompute

	// State per shard (pershard.go): by source index, the operators'
	// side given to its receiver (nil for a source without); the batch
	// loop runs betweenc's functions between two batches, and closes
	// loopDone when it ends, after which between runs them at once,
	// one at a time (afterLoop).
	shardStates []*shardStates
	betweenc    chan func()
	loopDone    chan struct{}
	afterLoop   sync.Mutex
	// unfinished: a batch's stateful operators ran and the batch did not
	// complete (it failed, or the Run stopped in it), so the state holds
	// records of no completed batch and no snapshot of it is given
	// (shardStates.Snapshot). Used by the batch loop, and after it under
	// afterLoop.
	unfinished bool

	bus       *bus          // delivers listener events
	watcher   *watcher      // warns of batches and cuts that take too long
	pending   atomic.Int64  // batches queued or running, for DrainError
	receiving []atomic.Bool // by source: its Start has been called and not returned
	stopping  atomic.Bool   // the drain is stopping the receivers
	inStop    []atomic.Bool // by source: the drain called its Stop, which has not returned
	running   atomic.Bool   // the batch runner runs a batch's outputs
	late      lateness      // the batch runner's

	// current is the batch being processed, whose progress watchBatch's
	// warnings name.
	current atomic.Pointer[run]
}

// job is a batch cut and waiting to run.
type job struct {
	time      batch.Time
	due       time.Time           // when the timer was due to cut it; zero for a recovered batch
	blocks    [][]batch.BlockInfo // by source index, in block order
	records   int
	nblocks   int
	resumed   int  // records of an earlier Run's blocks (BatchInfo.RecoveredRecords)
	recovered bool // allocated before a restart, read from the recovery log
	replay    bool // completed before a restart: recomputed for the state only
	skipped   bool // empty, and neither allocated nor completed in the log (batchSkipped)
	unlogged  bool // empty, of a stateful pipeline: the batch runner logs it (logEmpty)
	inRun     bool // empty, in a run of empty batches: neither allocated nor completed in the log (emptyRun)
	fill      bool // empty, at a time the log holds no batch at, before the last it holds (emptyJobs): run only if not quiet
	// ahead holds, by source and as blocks, the recomputations the
	// prefetcher makes of a recovered batch's blocks (nil for a source the
	// batch does not read, or a batch cut in this Run).
	ahead [][]*recomputed
}

func (j *job) info() BatchInfo {
	info := BatchInfo{Time: j.time, Blocks: j.nblocks, Records: j.records, Recovered: j.recovered, RecoveredRecords: j.resumed}
	for _, blocks := range j.blocks {
		for _, b := range blocks {
			info.Ranges = append(info.Ranges, b.Ranges...)
		}
	}
	return info
}

// newEngine snapshots p's graph; p.mu is held. cancel cancels the Run's
// context.
func newEngine(p *Pipeline, cancel context.CancelCauseFunc) *engine {
	e := &engine{
		cfg:          p.cfg,
		cancel:       cancel,
		sources:      slices.Clone(p.sources),
		outputs:      slices.Clone(p.outputs),
		quarantiners: slices.Clone(p.quarantiners),
		nodes:        len(p.nodes),
		shape:        p.shapeLocked(),
		log:          p.log,
		jobs:         make(chan *job, p.cfg.maxPendingBatches),
		bus:          newBus(p.cfg.Listeners, p.cfg.Logger, p.cfg.Clock),
		watcher:      newWatcher(p.cfg.Clock),

		receiving: make([]atomic.Bool, len(p.sources)),
		inStop:    make([]atomic.Bool, len(p.sources)),
		betweenc:  make(chan func()),
		loopDone:  make(chan struct{}),
	}
	for k, kq := range e.quarantiners {
		kq.out = len(e.outputs) + k
	}
	if plan := p.planShards(); len(plan) > 0 {
		e.shardStates = make([]*shardStates, len(p.sources))
		for i, nodes := range plan {
			e.shardStates[i] = newShardStates(e, i, nodes)
		}
	}
	reachable := make([]bool, len(p.nodes))
	var mark func(n *node)
	mark = func(n *node) {
		if reachable[n.id] {
			return
		}
		reachable[n.id] = true
		for _, parent := range n.parents {
			mark(parent)
		}
	}
	for _, o := range e.outputs {
		mark(o.n)
	}
	// A stream consumed more than once in a batch is computed once and
	// kept; the others run fused into their one consumer.
	consumers := make([]int, len(p.nodes))
	for id, n := range p.nodes {
		if reachable[id] {
			for _, parent := range n.parents {
				consumers[parent.id]++
			}
		}
	}
	for _, o := range e.outputs {
		consumers[o.n.id]++
	}
	e.used = reachable
	e.shared = make([]bool, len(p.nodes))
	for id, c := range consumers {
		e.shared[id] = c > 1
	}
	// A node's parents are made before it, so id order is parents first.
	for id, n := range p.nodes {
		if reachable[id] && n.tick != nil {
			e.ticks = append(e.ticks, n)
		}
	}
	return e
}

// run opens the recovery log, if any, and runs the pipeline until ctx is
// done (a stop, or a failure: its cause says which) or a drain requested
// on drainc has finished; then it closes the log. It returns the errors of
// opening and closing the log; the failures of the goroutines are the
// cause of ctx.
func (e *engine) run(ctx context.Context, drainc <-chan struct{}) (err error) {
	if e.log == nil && e.cfg.Recovery != nil {
		end := e.watchOpen()
		l, st, err := e.openLog(ctx)
		end()
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while opening: the cause says why
			}
			return err
		}
		defer func() {
			end := e.watchWait("stream: Run still waits for the recovery log's Close, its last call",
				"log", fmt.Sprintf("%T", e.cfg.Recovery),
				"fix", "the recovery log's Close must return: Run closes it once every other call has returned")
			cerr := l.Close()
			end()
			if cerr != nil && err == nil {
				err = fmt.Errorf("stream: close recovery log: %w", cerr)
			}
		}()
		if err := e.resume(st); err != nil {
			return err
		}
		e.log = &recoveryLog{log: l, compactEvery: e.cfg.CompactEvery,
			fail:      func(err error) { e.fail(fmt.Errorf("stream: %w", err)) },
			inherited: st.ReservedThrough, runThrough: lastRunThrough(st), inOrder: len(e.ticks) > 0}
		end = e.watchOpen()
		err = e.openState(ctx, l, st)
		end()
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped while restoring the state: the cause says why
			}
			return err
		}
	}
	if e.log == nil {
		e.log = noLog{}
	}
	e.runGraph(ctx, drainc)
	if ctx.Err() == nil {
		e.logOpenWindows()
	}
	l, ok := e.log.(*recoveryLog)
	if !ok {
		return nil
	}
	snapped := false
	if ctx.Err() == nil {
		// Not stopped now nor failed: the drain completed every batch.
		// Still bounded by the drain's bound, which cancels ctx.
		// The stop watcher has ended with the Run's goroutines: this
		// wait is watched on its own.
		var err error
		end := e.watchEnd("its final state snapshot to be stored (the recovery log's PutSnapshot, then Append)", "batch", e.lastRan)
		snapped, err = e.finalSnapshot(ctx, e.lastRan)
		end()
		e.fail(err)
	}
	if e.lastCut != 0 || l.runDone != 0 || snapped {
		// A Run stopped by its context may still give the times back,
		// those it reserved itself: not a crashed Run's, whose outputs
		// may have seen them.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		end := e.watchEnd("the recovery log to give back the batch times it reserved (a compaction: the log's Replace)", "batch", e.lastCut)
		l.release(rctx, max(e.lastCut, l.inherited), snapped, e.cfg.Logger)
		end()
		cancel()
	}
	return nil
}

// watchEnd watches a wait of a stopping Run after its goroutines, and so
// the stop watcher (watchStop), have ended, with watchWait, since nothing
// else would show a recovery log that ignores its ctx: it logs that Run
// still waits for what, with args.
func (e *engine) watchEnd(what string, args ...any) (end func()) {
	return e.watchWait("stream: the pipeline is stopping and Run still waits for "+what,
		slices.Concat(args, []any{"fix", "the recovery log (its Append, Replace, and PutSnapshot as a SnapshotStore) must return once its ctx is done: " +
			"Drain's ctx bounds the final snapshot (Config.DrainTimeout when Run's ctx is done), and Stop cancels it"})...)
}

// watchOpen watches, with watchWait, Run opening its recovery log (Open,
// then reading the log and the state snapshot, and recording the shape),
// before the stop watcher (watchStop) and the stall watchers start, since
// nothing else would show an Opener or a recovery log that ignores its ctx
// and does not return: Run could neither start nor stop.
func (e *engine) watchOpen() (end func()) {
	return e.watchWait("stream: Run still waits for the recovery log to open (its Opener's Open, then its Read, GetSnapshot and Append)",
		"log", fmt.Sprintf("%T", e.cfg.Recovery),
		"fix", "the recovery log's Open, Read, GetSnapshot and Append must return once their ctx is done: "+
			"Stop cancels it, and so does Run's ctx once Config.DrainTimeout has passed")
}

// watchWait watches a wait of Run that no other watcher sees: once it has
// taken stopWarnAfter, and again each time that doubles, it logs msg at
// WARN, with args and how long Run has waited. The func returned ends the
// watch.
func (e *engine) watchWait(msg string, args ...any) (end func()) {
	done := make(chan struct{})
	var w sync.WaitGroup
	w.Go(func() {
		waitWarning(e.cfg.Clock, done, stopWarnAfter, func(waited time.Duration) {
			e.cfg.Logger.Warn(msg, slices.Concat(args, []any{"waited", waited.Round(time.Second)})...)
		})
	})
	return func() {
		close(done)
		w.Wait()
	}
}

// logOpenWindows says, at the end of a drain, which windows hold batches
// with records that no window output yet: the Run ends before their time
// (see Pipeline.Drain). With a recovery log a restart before that time
// outputs them (INFO); without one none does (WARN).
func (e *engine) logOpenWindows() {
	if e.lastRan == 0 {
		return
	}
	for _, n := range e.ticks {
		w, ok := n.state.(windowed)
		if !ok {
			continue
		}
		next, batches := w.unwindowed(e.lastRan)
		if batches == 0 {
			continue
		}
		if e.cfg.Recovery != nil {
			e.cfg.Logger.Info("stream: drained with a window open: its time is after the last batch; "+
				"a restart with the recovery log before that time outputs it whole, one after it does not",
				"window", n.String(), "next", next, "batches", batches, "last", e.lastRan)
			continue
		}
		e.cfg.Logger.Warn("stream: drained with a window open: its time is after the last batch, and without a recovery log "+
			"no restart outputs its batches; set Config.Recovery to keep them for a restart",
			"window", n.String(), "next", next, "batches", batches, "last", e.lastRan)
	}
}

// releaseTimeout bounds the compaction that gives back a stopping Run's
// reserved batch times (recoveryLog.release).
const releaseTimeout = 10 * time.Second

// fail stops the Run with err as the cause of its context, unless err is
// nil or the Run is stopping anyway (the first cause is kept): for the
// errors the goroutines return, and for errors found outside them, such as
// a failed append to the recovery log, which is fatal whoever made it.
func (e *engine) fail(err error) {
	if err != nil {
		e.cancel(err)
	}
}

// runGraph starts the goroutines of the Run and waits for them.
func (e *engine) runGraph(ctx context.Context, drainc <-chan struct{}) {
	e.ctx = ctx
	for _, s := range e.sources {
		s.bind(e)
	}
	var all, receivers sync.WaitGroup
	if e.pre = e.newPrefetcher(); e.pre != nil {
		all.Go(func() { e.pre.run(ctx, e.sources) })
	}
	receiversDone := make(chan struct{}) // closed by the drainer
	for i, s := range e.sources {
		receivers.Add(1)
		all.Go(func() {
			defer receivers.Done()
			e.fail(e.runReceiver(ctx, i, s))
		})
	}
	all.Go(func() { e.drain(ctx, drainc, &receivers, receiversDone) })
	all.Go(func() { e.fail(e.timerLoop(ctx, receiversDone)) })
	all.Go(func() {
		// A user function that calls runtime.Goexit in the batch runner's
		// goroutine (a task run there, ForEachBatch) ends it: fail the Run
		// rather than leave it waiting for batches that never run.
		returned := false
		defer func() {
			if !returned {
				e.fail(errTaskExited)
			}
		}()
		e.fail(e.runLoop(ctx))
		returned = true
	})
	ended := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() { e.watchStop(ctx, drainc, ended) })
	watch.Go(func() { e.watcher.run(ended) })
	all.Wait()
	close(ended)
	watch.Wait()
}

// left returns what a drain giving up for why leaves: the batches cut and
// not completed, the blocks stored and not completed, the receivers still
// running.
func (e *engine) left(why error) *DrainError {
	d := &DrainError{Batches: int(e.pending.Load()), Err: why}
	for i, s := range e.sources {
		blocks, records := s.stored()
		d.Blocks += blocks
		d.Records += records
		if e.receiving[i].Load() {
			d.Receivers = append(d.Receivers, i)
		}
	}
	return d
}

// emit posts a listener event; see bus.
func (e *engine) emit(f func(Listener)) { e.bus.post(f) }

// runReceiver runs source i's receiver until its Start returns. An error
// from Start while the Run is not stopping is fatal.
func (e *engine) runReceiver(ctx context.Context, i int, s sourceRunner) error {
	e.emit(func(l Listener) { l.ReceiverStarted(ReceiverInfo{Source: i}) })
	e.receiving[i].Store(true)
	err := receiverCall("Start", func() error { return s.start(ctx, e) })
	e.receiving[i].Store(false)
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("stream: source %d: %w", i, err)
		info := ReceiverInfo{Source: i, Err: err}
		e.emit(func(l Listener) { l.ReceiverError(info) })
		e.emit(func(l Listener) { l.ReceiverStopped(info) })
		return err
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		e.cfg.Logger.Warn("stream: receiver returned an error while stopping", "source", i, "err", err)
	}
	if err == nil && ctx.Err() == nil && !e.stopping.Load() {
		// Not fatal (a memory source stopped by its program ends its
		// input so), but the source delivers nothing more in this Run.
		e.cfg.Logger.Warn("stream: a receiver's Start returned without being asked to stop: "+
			"its source delivers nothing more until a restart", "source", i,
			"fix", "a receiver's Start returns after its Stop or when its ctx is done (source.Receiver); "+
				"to end a pipeline's input, call Pipeline.Drain, which stops every receiver")
	}
	e.emit(func(l Listener) { l.ReceiverStopped(ReceiverInfo{Source: i}) })
	return nil
}

// drain waits for a drain to be requested, then stops every receiver
// gracefully, waits for their Start to return and closes receiversDone.
// The receivers' Stop gets ctx, so a stop now (Stop, a failure, a drain
// past its bound) releases a Stop that hangs.
func (e *engine) drain(ctx context.Context, drainc <-chan struct{}, receivers *sync.WaitGroup, receiversDone chan<- struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-drainc:
	}
	e.cfg.Logger.Info("stream: draining: stopping receivers")
	e.stopping.Store(true)
	var stops sync.WaitGroup
	for i, s := range e.sources {
		stops.Go(func() {
			e.inStop[i].Store(true)
			defer e.inStop[i].Store(false)
			if err := receiverCall("Stop", func() error { return s.stop(ctx) }); err != nil && ctx.Err() == nil {
				err = fmt.Errorf("stream: source %d: stop: %w", i, err)
				e.cfg.Logger.Warn("stream: receiver stop failed", "source", i, "err", err)
				e.emit(func(l Listener) { l.ReceiverError(ReceiverInfo{Source: i, Err: err}) })
			}
		})
	}
	stops.Wait()
	receivers.Wait()
	close(receiversDone)
}

// firstBatchTime returns the first multiple of iv strictly after now.
func firstBatchTime(now time.Time, iv time.Duration) batch.Time {
	ms, ivms := now.UnixMilli(), iv.Milliseconds()
	return batch.Time((ms/ivms + 1) * ivms)
}

// timerLoop first queues the batches recovered from the log, then cuts a
// batch at every multiple of the batch interval after the last logged one,
// never skipping one (a late timer catches up), until ctx is done or, once
// the receivers have stopped for a drain, no stored block is left
// unbatched. It is the only closer of e.jobs, which it closes when a drain
// is done.
func (e *engine) timerLoop(ctx context.Context, receiversDone <-chan struct{}) error {
	empty := e.emptyJobs()
	var bt *batchTimer
	if len(e.ticks) > 0 {
		// With state, the timer first: queueing the batches waits while
		// the queue is full (behind a slow recomputation), and a timer
		// made after that would skip the batch times that passed
		// meanwhile, a window's among them. (A pipeline without state
		// has nothing at a time without records, and starts at the
		// clock once its recovered batches are queued.)
		bt = e.newBatchTimer()
	}
	for _, j := range byTime(e.recovered, empty) {
		if !e.queue(ctx, j) {
			return nil
		}
	}
	if bt == nil {
		bt = e.newBatchTimer()
	}
	e.tags.start(bt.next)
	timer := e.cfg.Clock.NewTimer(bt.wait())
	defer timer.Stop()
	draining := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-receiversDone:
			receiversDone, draining = nil, true
			if e.unbatched() == 0 {
				close(e.jobs)
				return nil
			}
		case <-timer.C():
			if err := e.schedule(ctx, bt.next, bt.due()); err != nil {
				return err
			}
			e.lastCut = bt.next
			if draining && e.unbatched() == 0 {
				close(e.jobs)
				return nil
			}
			bt.advance()
			timer.Reset(bt.wait())
		}
	}
}

// emptyJobs returns the empty batches a restart of a pipeline with
// stateful operators runs, in time order: one at every batch time after
// the clock and after the batches its log holds completed (or in its
// snapshot), up to the last time the log holds (a pending batch's, or the
// end of the times an idle stretch reserved, see reserveAhead), at which
// the log holds no batch. The pending batches run among them, in time
// order, and the restart's records go to the batches after them. Those
// times hold no record, since an output may have seen them empty (DESIGN.md,
// "Empty batches"); but a window's time among them, a timeout or any
// other empty batch that moves or shows the state must still run, as it
// would have in the crashed Run: a window holding records of batches
// before the crash would otherwise be output by no batch, and those
// records reach no output through it. That happens when the log reserved
// the times while the pipeline was idle, or when the crashed Run's timer
// cut batches ahead of its runner (a slow output, a restart that crashed
// again while recomputing). The batch runner decides, as for any empty
// batch, whether each moves or shows the state (quietAt); one that does
// not is left out (runJob): no operator, output or listener sees it. The
// crashed Run ran none of the times that do, since it would have logged
// them (as a run of empty batches, which a restart runs again if a crash
// interrupts it, and whose times the log then holds), so none runs twice;
// a time the crashed Run ran quiet is quiet again, the state being what it
// was then. A time that passed while the pipeline was down does not run,
// as no batch does (see Pipeline.Drain).
func (e *engine) emptyJobs() []*job {
	if len(e.ticks) == 0 || !e.hasLast {
		return nil
	}
	iv := e.cfg.BatchInterval
	t := firstBatchTime(e.cfg.Clock.Now(), iv)
	if e.hasDone {
		t = max(t, firstBatchTime(e.lastDone.Std(), iv))
	}
	held := make(map[batch.Time]bool, len(e.recovered))
	for _, j := range e.recovered {
		held[j.time] = true
	}
	var jobs []*job
	for ; t <= e.last; t = t.Add(iv) {
		if !held[t] {
			jobs = append(jobs, &job{time: t, blocks: make([][]batch.BlockInfo, len(e.sources)), unlogged: true, fill: true})
		}
	}
	return jobs
}

// byTime merges recovered and empty, each in time order, into one list in
// time order.
func byTime(recovered, empty []*job) []*job {
	out := make([]*job, 0, len(recovered)+len(empty))
	for len(recovered) > 0 || len(empty) > 0 {
		if len(empty) == 0 || len(recovered) > 0 && recovered[0].time < empty[0].time {
			out, recovered = append(out, recovered[0]), recovered[1:]
			continue
		}
		out, empty = append(out, empty[0]), empty[1:]
	}
	return out
}

// batchTimer paces the batches of a Run. Batch times are multiples of the
// interval that strictly increase: the first is the first multiple after
// both the clock's time and the last logged batch time (DESIGN.md, Data
// flow). When to cut them is measured from the Run's start on the clock's
// readings, which for clock.Real are monotonic: the first is cut at the
// clock's next multiple of the interval, each later one an interval after
// the one before, whatever the wall clock says (but not later than the
// wall clock reaching their time: see wait). A restart on a machine
// whose clock is behind the last logged batch, or a wall clock stepped back
// during the Run, neither stalls batches until the wall clock catches up
// nor reuses a batch time; a wait is never longer than one interval, even
// on a clock without monotonic readings.
type batchTimer struct {
	clk    clock.Clock
	iv     time.Duration
	next   batch.Time // the time of the next batch to cut
	anchor time.Time  // the clock's reading when batch first is due
	first  batch.Time
}

// newBatchTimer returns the timer of the batches after the recovered ones.
func (e *engine) newBatchTimer() *batchTimer {
	clk, iv := e.cfg.Clock, e.cfg.BatchInterval
	now := clk.Now()
	next := firstBatchTime(now, iv)
	due := now.Add(next.Std().Sub(now))
	if e.hasLast && next <= e.last {
		ahead := e.last.Std().Sub(now)
		switch {
		case e.lastReserved && ahead <= reserveAhead+iv:
			// What an idle pipeline reserved, up to reserveAhead past its
			// last batch: expected after any restart of one.
			e.cfg.Logger.Info("stream: new batches follow the batch times the recovery log reserved, "+
				"an interval apart, ahead of the clock", "now", now, "reserved", e.last, "ahead", ahead)
		case e.lastReserved:
			// More than one Run reserves: each Run that crashed reserved
			// up to reserveAhead past its last batch, which followed the
			// reservation of the one before.
			e.cfg.Logger.Warn("stream: new batches follow the batch times the recovery log reserved, an interval apart, "+
				"further ahead of the clock than one Run reserves: Runs crashed in a row, each reserving up to 10s past "+
				"its last batch, or this clock runs behind the one that wrote the log; a Run that stops gives its times back",
				"now", now, "reserved", e.last, "ahead", ahead)
		default:
			e.cfg.Logger.Warn("stream: the clock is behind the last batch in the recovery log; "+
				"new batches follow the log's times, an interval apart",
				"now", now, "last", e.last, "behind", ahead)
		}
		next = firstBatchTime(e.last.Std(), iv)
	}
	return &batchTimer{clk: clk, iv: iv, next: next, anchor: due, first: next}
}

// wait returns how long from now the next batch is due: at most one
// interval, and negative when it is late. It is due an interval after the
// one before on the monotonic readings, or earlier if the wall clock has
// reached its time: a wall clock stepped forward is caught up with, as a
// late timer is, so batch times keep following it when it is ahead.
func (b *batchTimer) wait() time.Duration {
	now := b.clk.Now()
	return min(b.due().Sub(now), b.next.Std().Sub(now), b.iv)
}

// due returns the clock's reading at which the next batch is due, an
// interval after the one before.
func (b *batchTimer) due() time.Time { return b.anchor.Add(b.next.Std().Sub(b.first.Std())) }

// advance moves on to the batch after the one just cut.
func (b *batchTimer) advance() { b.next = b.next.Add(b.iv) }

func (e *engine) unbatched() int {
	n := 0
	for _, s := range e.sources {
		n += s.unbatched()
	}
	return n
}

// schedule cuts the batch at time t, due at the clock's reading due, from
// every source's unbatched blocks, logs the allocation and queues the batch,
// waiting while maxPendingBatches batches are queued.
func (e *engine) schedule(ctx context.Context, t batch.Time, due time.Time) error {
	j, err := e.cutWatched(ctx, t)
	if err != nil {
		return err
	}
	j.due = due
	e.queue(ctx, j)
	return nil
}

// scheduled tells the listeners that j is scheduled.
func (e *engine) scheduled(j *job) {
	info := j.info()
	info.Unbatched = e.unbatched()
	e.emit(func(l Listener) { l.BatchScheduled(info) })
}

// queue tells the listeners that j is scheduled and queues it, waiting
// while maxPendingBatches batches are queued. It reports false if ctx was
// done first.
func (e *engine) queue(ctx context.Context, j *job) bool {
	e.pending.Add(1)
	if !j.replay && !j.fill { // a fill job, if it runs (runJob)
		e.scheduled(j)
	}
	select {
	case e.jobs <- j:
		return true
	case <-ctx.Done():
		e.pending.Add(-1)
		return false
	}
}

// cut makes the batch at time t of every source's unbatched blocks and logs
// the allocation, unless the blocks' entries made it (batchTags): blocks
// pushed from now on are for the next batch, and those pushed for t are
// waited for. An empty batch of a pipeline without stateful operators
// is not allocated in the log, only its time reserved (batchSkipped): its
// outputs get an empty batch, which a restart has nothing to recompute of,
// and no operator's state depends on it. An empty batch of a stateful
// pipeline is left to the batch runner, which alone may look at the state:
// see logEmpty.
func (e *engine) cut(ctx context.Context, t batch.Time) (*job, error) {
	if err := e.tags.cut(ctx, t, t.Add(e.cfg.BatchInterval)); err != nil {
		return nil, err
	}
	j := &job{time: t, blocks: make([][]batch.BlockInfo, len(e.sources))}
	var all []batch.BlockInfo
	logged := true
	for i, s := range e.sources {
		var untimed bool
		j.blocks[i], untimed = s.take(t)
		logged = logged && !untimed
		for _, b := range j.blocks[i] {
			j.records += b.Count
			if e.resumed[b.ID] {
				j.resumed += b.Count
				delete(e.resumed, b.ID)
			}
		}
		j.nblocks += len(j.blocks[i])
		all = append(all, j.blocks[i]...)
	}
	if len(all) == 0 {
		if len(e.ticks) > 0 {
			j.unlogged = true
			return j, nil
		}
		j.skipped = true
		if err := e.log.batchSkipped(ctx, t); err != nil {
			return nil, &BatchError{Time: t, Err: fmt.Errorf("log reserved batch times: %w", err)}
		}
		return j, nil
	}
	if err := e.log.batchAllocated(ctx, t, all, logged); err != nil {
		return nil, &BatchError{Time: t, Err: fmt.Errorf("log allocation: %w", err)}
	}
	return j, nil
}

// runLoop runs the queued batches in order until ctx is done or e.jobs is
// closed. A batch that fails because the Run is stopping is not an error.
func (e *engine) runLoop(ctx context.Context) error {
	defer close(e.loopDone)
	for {
		select {
		case <-ctx.Done():
			return nil
		case f := <-e.betweenc:
			f()
		case j, ok := <-e.jobs:
			if !ok || ctx.Err() != nil {
				return nil
			}
			begun := e.cfg.Clock.Now()
			err := e.runJob(ctx, j)
			e.late.ran(begun, e.cfg.Clock.Now().Sub(begun))
			if err == nil {
				e.lastRan = j.time
			}
			e.pending.Add(-1)
			if j.recovered && e.pre != nil {
				e.pre.finished(ctx, j)
			}
			if err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// runJob runs one batch and reports it to the listeners.
func (e *engine) runJob(ctx context.Context, j *job) error {
	if j.replay {
		return e.replay(ctx, j)
	}
	if j.fill {
		// An empty time a restart runs (emptyJobs): one that would move
		// and show nothing, which the crashed Run may have run, is left
		// out, no operator, output or listener seeing it; the others are
		// scheduled now, as far as listeners know (queue).
		if e.quietAt(j.time) {
			e.log.runCompleted(j.time)
			return nil
		}
		e.scheduled(j)
	}
	info := j.info()
	start := e.cfg.Clock.Now()
	// From its time, or from when it was due if that came first: a
	// restart whose log holds batch times ahead of the clock (reserved
	// ones) cuts its batches ahead of it, an interval apart (batchTimer),
	// and they are late when they start after they were due, not after
	// their time.
	ref := j.time.Std()
	if !j.due.IsZero() && j.due.Before(ref) {
		ref = j.due
	}
	// A batch a restart runs again may be ahead of the clock (the empty
	// batches of a run, reserved ahead): it is not late, nor early.
	info.SchedulingDelay = max(start.Sub(ref), 0)
	if !j.recovered {
		e.late.check(e.cfg.Logger, j.time, start, info.SchedulingDelay, e.cfg.BatchInterval)
	}
	info.Unbatched = e.unbatched()
	started := info // emit delivers later: post a copy
	e.emit(func(l Listener) { l.BatchStarted(started) })
	info.Outputs = e.outputInfos()
	e.running.Store(true)
	err := e.processWatched(ctx, j, start, info.Outputs)
	e.running.Store(false)
	info.ProcessingTime = e.cfg.Clock.Now().Sub(start)
	if err != nil {
		err = batchError(j.time, err)
	}
	info.Err = err
	info.Unbatched = e.unbatched()
	e.cfg.Logger.Debug("stream: batch done", "batch", j.time, "records", info.Records,
		"delay", info.SchedulingDelay, "took", info.ProcessingTime, "err", err)
	for i, s := range e.sources {
		if oerr := s.observe(ctx, info); oerr != nil {
			err = batchError(j.time, fmt.Errorf("stream: source %d: %w", i, oerr))
			info.Err = err
			break
		}
	}
	e.emit(func(l Listener) { l.BatchCompleted(info) })
	if err != nil || j.skipped {
		return err // a skipped batch is not in the log: no snapshot after it
	}
	return e.afterBatch(ctx, j.time, j.inRun)
}

// batchError returns the *BatchError of batch t that failed with err,
// with the panic err holds, if any.
func batchError(t batch.Time, err error) *BatchError {
	be := &BatchError{Time: t, Err: err}
	if pe, ok := errors.AsType[*panicError](err); ok {
		be.Panic, be.Stack = pe.Value, pe.Stack
	}
	return be
}

// logEmpty logs the empty batch j of a stateful pipeline before its
// stateful nodes tick: like an empty batch of a pipeline without state (a
// reserved batch time, batchSkipped) if every stateful operator is quiet,
// so that the batch changes no state and every output gets an empty batch,
// which a replay may leave out and a restart has nothing to recompute of;
// otherwise in a run of empty batches (emptyRun), since it moves the state
// (timeouts, windows, updates) or shows it to an output: a restart replays
// it for the state, or runs it again if no later entry says it completed.
// The run may be logged after the allocation of a later batch the timer
// cut meanwhile: a crash between the two leaves a log in which j never was,
// and j had not changed the state nor run an output.
func (e *engine) logEmpty(ctx context.Context, j *job) error {
	if e.quietAt(j.time) {
		j.skipped = true
		if err := e.log.batchSkipped(ctx, j.time); err != nil {
			return fmt.Errorf("log reserved batch times: %w", err)
		}
		return nil
	}
	j.inRun = true
	if err := e.log.emptyRun(ctx, j.time, e.cfg.BatchInterval); err != nil {
		return fmt.Errorf("log a run of empty batches: %w", err)
	}
	return nil
}

// quietAt reports whether every stateful operator is quiet at an empty
// batch at t: it would move no state and show none (see logEmpty).
func (e *engine) quietAt(t batch.Time) bool {
	for _, n := range e.ticks {
		if n.state == nil || !n.state.quiet(t, func(m *node) bool { return e.used[m.id] }) {
			return false
		}
	}
	return true
}

// process computes the stateful nodes, runs the outputs in declaration
// order, then completes the batch: logged, receivers told, blocks dropped.
// A panic in user code, whether in the driver's goroutine (ForEachBatch, a
// state update) or in a task, fails the batch with a *panicError. What the
// outputs' failure policies did goes to outs, by output index.
func (e *engine) process(ctx context.Context, j *job, outs []OutputInfo) error {
	r := &run{ctx: ctx, job: j, memo: make([]any, e.nodes), par: e.cfg.Parallelism, shared: e.shared,
		clk: e.cfg.Clock, logger: e.cfg.Logger, outs: outs}
	e.current.Store(r)
	defer e.current.Store(nil)
	if j.unlogged {
		if err := e.logEmpty(ctx, j); err != nil {
			return err
		}
	}
	e.unfinished = true
	for _, n := range e.ticks {
		if err := safely(func() error { return n.tick(r) }); err != nil {
			return fmt.Errorf("%v: %w", n, err)
		}
	}
	for i, o := range e.outputs {
		r.progress.at(i)
		if err := safely(func() error { return o.run(r) }); err != nil {
			return fmt.Errorf("output %d, %v: %w", i, o, err)
		}
	}
	if j.skipped || j.inRun {
		e.log.runCompleted(j.time)
	} else if err := e.log.batchCompleted(ctx, j.time); err != nil {
		return fmt.Errorf("log completion: %w", err)
	}
	for i, s := range e.sources {
		if err := s.complete(ctx, j.blocks[i]); err != nil {
			return fmt.Errorf("stream: source %d: %w", i, err)
		}
		if e.shardStates != nil && e.shardStates[i] != nil {
			e.shardStates[i].completed(j.blocks[i])
		}
	}
	e.unfinished = false
	return nil
}

// outputInfos returns the zero OutputInfo of each output, then of each
// keyed, window, state or Transform operator with Quarantine, named.
func (e *engine) outputInfos() []OutputInfo {
	outs := make([]OutputInfo, len(e.outputs)+len(e.quarantiners))
	for i, o := range e.outputs {
		outs[i].Output = o.String()
	}
	for _, kq := range e.quarantiners {
		outs[kq.out].Output = kq.name
	}
	return outs
}
