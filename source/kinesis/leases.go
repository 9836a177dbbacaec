package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/streak"
	"github.com/weirstream/weir/source"
)

// leaseRun is the lease side of one Start with Config.Leases: the
// Coordinator holding this worker's leases, the Checkpointer committing
// their checkpoints through it, and the assigner starting and stopping a
// shard reader as each lease comes and goes.
//
// Lease events (from the Coordinator's goroutine) and shard ends (from the
// receiver's) are queued and handled, in order, by the assigner goroutine,
// the only one that starts and stops readers.
type leaseRun struct {
	rn     *run
	cfg    leasetable.Config
	coord  *lease.Coordinator
	cp     *checkpointer.Checkpointer
	state  *stateRun // state per shard, nil without (shardstate.go)
	report func(error)
	log    *slog.Logger

	wake chan struct{} // 1 slot: events queued, or completed numbers moved

	mu        sync.Mutex
	events    []leaseEvent
	owned     map[string]bool      // shards read under a lease this worker holds
	ending    map[string]endWait   // drained shards waiting for completion (run.completedThrough)
	handing   map[string]time.Time // shards asked for by another worker -> when to hand off at the latest (handoff.go)
	refused   int64                // shards refused (Stats.RefusedShards)
	fatal     error                // stops the receiver (assign returns it)
	reload    map[string]time.Time // shards to acquire again, not before the time: state not loaded yet (shardstate.go)
	waiting   map[string]loadWait  // shards whose load waits for records of an earlier hold to complete (see acquire)
	unloaded  streak.Kinds         // shards whose state load failed and is tried again (loadFailed)
	unsaved   streak.Kinds         // shards whose last snapshot failed to store (stateFailed)
	loading   string               // the shard whose state acquire loads, if any
	abandon   context.CancelFunc   // cancels that load (a hand-off asked for it)
	read      map[string]bool      // shards read in this run, not logged finished since: the recovery log may hold their positions
	forgotten map[string]bool      // finished shards whose position the recovery log no longer holds, or never held (forgetFinished)
}

// leaseEvent is one queued event; exactly one of its fields is set.
type leaseEvent struct {
	acquired *lease.Lease
	lost     string
	handoff  string
	drained  *drainEvent
	refused  *refusal
}

// refusal is a shard whose reader could not start at its lease's
// checkpoint.
type refusal struct {
	lease lease.Lease
	err   error
}

// newLeaseRun builds the DynamoDB client (unless given), the Checkpointer
// and the Coordinator; it makes no call.
func newLeaseRun(ctx context.Context, rn *run, rt source.Runtime[Record]) (*leaseRun, error) {
	cfg := *rn.cfg.Leases
	cfg.CheckpointInterval = checkpointInterval(cfg, rt.BatchInterval)
	cfg.TableName = leaseTable(cfg, rn.cfg.App)
	if cfg.AWS == nil {
		cfg.AWS = rn.cfg.AWS
	}
	db, err := lease.Client(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("kinesis: %w", err)
	}
	cfg.DynamoDB = db
	lr := &leaseRun{
		rn: rn, cfg: cfg, report: rt.WithDefaults().ReportError,
		log:  rn.logger.With("worker", cfg.WorkerID),
		wake: make(chan struct{}, 1), owned: make(map[string]bool), ending: make(map[string]endWait),
		handing: make(map[string]time.Time), read: make(map[string]bool), forgotten: make(map[string]bool),
	}
	lr.cp, err = checkpointer.New(checkpointer.Config{
		Interval: cfg.CheckpointInterval, Latest: lr.latest, Clock: rn.clock, Logger: lr.log,
	})
	if err != nil {
		return nil, fmt.Errorf("kinesis: checkpointer: %w", err)
	}
	if lr.state, err = newStateRun(rt.ShardState, db, cfg.TableName, cfg.TableName, lr); err != nil {
		return nil, err
	}
	lr.coord, err = lease.NewCoordinator(lease.CoordinatorConfig{
		Config:     cfg,
		ListShards: lr.listShards, ShardSyncInterval: rn.cfg.ShardSyncInterval,
		InitialPosition: string(rn.cfg.InitialPosition),
		OnAcquired:      func(l lease.Lease) { lr.queue(leaseEvent{acquired: &l}) },
		OnLost:          func(shard string) { lr.queue(leaseEvent{lost: shard}) },
		OnHandoff:       lr.asked,
		OnBadItem:       func(b *leasetable.BadItemError) { lr.report(fmt.Errorf("kinesis: %w", b)) },
		Clock:           rn.clock, Logger: rn.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("kinesis: lease coordinator: %w", err)
	}
	return lr, nil
}

// listShards is the Coordinator's shard list.
func (lr *leaseRun) listShards(ctx context.Context) ([]lease.ShardInfo, error) {
	shards, err := lr.rn.listShards(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]lease.ShardInfo, len(shards))
	for i, s := range shards {
		out[i] = lease.ShardInfo{ID: s.ID, ParentIDs: s.parents(), StartingHashKey: s.StartingHashKey, EndingHashKey: s.EndingHashKey}
	}
	return out, nil
}

// latest is the Checkpointer's Latest (guarantee G4): the greatest
// completed sequence number of shard, whatever the recovery log. A stored
// number is never checkpointed, not even with a DynamoDB recovery log: a
// worker that takes the shard over reads its own log, not the one that
// holds the blocks, so records stored but not completed past the
// checkpoint would be lost if their worker never came back with that log.
func (lr *leaseRun) latest(shard string) (string, bool) {
	seq, ok := lr.rn.r.progress.latestCompleted(shard)
	if ok && lr.state != nil {
		return lr.state.capped(shard, seq)
	}
	return seq, ok
}

// queue queues ev for the assigner goroutine. It never blocks.
func (lr *leaseRun) queue(ev leaseEvent) {
	lr.mu.Lock()
	lr.events = append(lr.events, ev)
	lr.mu.Unlock()
	lr.signal()
}

// asked queues a hand-off another worker asked for, and abandons the load
// of the shard's state if it is under way: the assigner, busy loading,
// would otherwise act on the request only after the load, or after every
// load it has in hand, however long they take (past a lease duration, the
// lease is lost instead of handed off, and no worker reads the shard
// meanwhile).
func (lr *leaseRun) asked(shard string) {
	lr.queue(leaseEvent{handoff: shard})
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.loading == shard {
		lr.abandon()
	}
}

// handoffQueuedLocked reports whether a hand-off of shard is queued;
// lr.mu is held.
func (lr *leaseRun) handoffQueuedLocked(shard string) bool {
	return slices.ContainsFunc(lr.events, func(ev leaseEvent) bool { return ev.handoff == shard })
}

// signal wakes whoever waits on lr.wake, without blocking.
func (lr *leaseRun) signal() {
	select {
	case lr.wake <- struct{}{}:
	default:
	}
}

// run runs the Coordinator and the Checkpointer beside the receiver's
// readers (lr is their assigner) until stop or ctx, then shuts down: on
// stop, gracefully (see shutdown); on ctx, at once, leaving the leases to
// expire. A Coordinator that cannot run (the table cannot be created or
// read) stops the receiver with its error.
func (lr *leaseRun) run(ctx context.Context, stop <-chan struct{}) error {
	serveCtx, cancelServe := context.WithCancel(ctx)
	defer cancelServe()
	leaseCtx, cancelLeases := context.WithCancel(ctx)
	defer cancelLeases()
	coordErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := lr.coord.Run(leaseCtx); err != nil && leaseCtx.Err() == nil {
			coordErr <- err
			cancelServe()
		}
	})
	wg.Go(func() { _ = lr.cp.Run(leaseCtx) }) // returns ctx.Err(), or nil after Close
	if lr.state != nil {
		if err := lr.state.ensureTable(ctx, lr); err != nil {
			cancelLeases()
			wg.Wait()
			return err
		}
		wg.Go(func() { lr.state.saveLoop(leaseCtx, lr) })
	}
	err := lr.rn.serve(serveCtx, stop, lr)
	if err == nil && serveCtx.Err() == nil {
		lr.shutdown(ctx)
		// A final snapshot the driver could not take (see stateFailed).
		lr.mu.Lock()
		err = lr.fatal
		lr.mu.Unlock()
	}
	cancelLeases()
	wg.Wait()
	select {
	case cerr := <-coordErr:
		return fmt.Errorf("kinesis: lease table %s: %w", lr.cfg.TableName, cerr)
	default:
	}
	return err
}

// assign is the lease assigner: it starts a reader for each lease
// acquired, stops the reader of each lease lost, and marks each shard read
// to its end SHARD_END once all its records are completed, until ctx is
// done.
func (lr *leaseRun) assign(ctx context.Context, c *control) error {
	// Completions wake the loop; the ticker retries failed shard ends.
	t := lr.rn.clock.NewTicker(lr.shardEndRetry())
	defer t.Stop()
	for {
		lr.handleEvents(ctx, c)
		lr.finishEnded(ctx)
		lr.forgetFinished(ctx, c)
		lr.finishHandoffs(ctx)
		lr.mu.Lock()
		fatal, reload := lr.fatal, lr.reload
		lr.reload = nil
		lr.mu.Unlock()
		now := lr.rn.clock.Now()
		for shard, at := range reload {
			if now.Before(at) { // a failed load: tried again after a pause
				lr.retryAcquire(shard, at.Sub(now))
				continue
			}
			lr.mu.Lock()
			owned := lr.owned[shard]
			lr.mu.Unlock()
			// Under the lease held now: an entry of an earlier hold must
			// not claim the state with an older counter.
			if l, ok := lr.heldLease(shard); ok && !owned {
				lr.acquire(ctx, c, l)
			}
		}
		if fatal != nil {
			return fatal
		}
		c.forgetShards()
		select {
		case <-ctx.Done():
			return nil
		case <-lr.wake:
		case <-t.C():
		}
	}
}

// shardEndRetry is the period at which a failed SHARD_END mark is tried
// again: as often as leases are renewed, whatever the checkpoint interval,
// so that a shard's children do not wait a checkpoint interval (a minute by
// default) for one failed write.
func (lr *leaseRun) shardEndRetry() time.Duration {
	retry := lr.cfg.CheckpointInterval
	if r := lr.cfg.RenewInterval; r > 0 && r < retry {
		retry = r
	}
	return retry
}

// handleEvents handles the queued events in order, and those queued
// meanwhile; those not handled yet stay queued, where loadState sees a
// hand-off asked for (handoffQueuedLocked). With c nil (shutting down, readers
// stopped) acquired leases are not read: Drain hands them back.
func (lr *leaseRun) handleEvents(ctx context.Context, c *control) {
	for {
		lr.mu.Lock()
		if len(lr.events) == 0 {
			lr.mu.Unlock()
			return
		}
		ev := lr.events[0]
		lr.events = lr.events[1:]
		lr.mu.Unlock()
		switch {
		case ev.acquired != nil && c != nil:
			lr.acquire(ctx, c, *ev.acquired)
		case ev.refused != nil:
			lr.refuse(ctx, *ev.refused)
		case ev.lost != "":
			lr.lose(ctx, c, ev.lost)
		case ev.handoff != "":
			lr.startHandoff(ctx, c, ev.handoff)
		case ev.drained != nil:
			lr.mu.Lock()
			if lr.owned[ev.drained.shard] {
				lr.ending[ev.drained.shard] = endWait{stored: ev.drained.lastSeq, since: lr.rn.clock.Now()}
			}
			lr.mu.Unlock()
		}
	}
}

// acquire starts reading a shard whose lease this worker took, and
// registers it with the Checkpointer.
func (lr *leaseRun) acquire(ctx context.Context, c *control, l lease.Lease) {
	if l.Checkpoint == checkpointer.ShardEnd {
		return // finished: nothing left to read
	}
	log := lr.log.With("shard", l.Shard)
	if c.reading(l.Shard) {
		// A reader from an earlier hold of the lease still runs (its loss
		// is reported first, so this is a last resort): it stops before
		// the new one starts, which reads after what it stored.
		log.Warn("kinesis: a reader of a newly leased shard still runs; stopping it first")
		if err := c.stopShard(ctx, l.Shard); err != nil {
			return
		}
	}
	if lr.state != nil && !lr.settled(l) {
		// Records of an earlier hold of the lease, or of a parent's, are
		// still in the driver: loaded now, the state would count them, and
		// the snapshot loaded holds them already. They complete first (the
		// state leaves them out); the assigner tries again then.
		lr.waitToLoad(log, l)
		lr.retryAcquire(l.Shard, 0)
		return
	}
	lr.mu.Lock()
	delete(lr.waiting, l.Shard)
	lr.mu.Unlock()
	if err := lr.cp.Register(l.Shard, lr.coord.CommitterFor(l), l.Checkpoint); err != nil {
		log.Warn("kinesis: registering a shard for checkpoints failed; not reading it", "err", err)
		return
	}
	pos := lr.position(l)
	if lr.state != nil {
		at, abandoned, err := lr.loadState(ctx, l)
		if err != nil {
			_ = lr.cp.Remove(ctx, l.Shard, nil)
			if abandoned {
				lr.startHandoff(ctx, c, l.Shard) // handed off unread
				return
			}
			lr.loadFailed(ctx, l, err)
			return
		}
		lr.stateCallOK(&lr.unloaded, l.Shard, "kinesis: shard states load again")
		if at != "" && pos.after(at) {
			pos = position{After: at}
		}
	}
	hooks := readerHooks{
		guard:  func() lease.Hold { return lr.coord.HoldOfLease(l) },
		failed: func(err error) error { return lr.readerFailed(l, pos, err) },
	}
	if err := c.startShard(l.Shard, pos, hooks); err != nil {
		if !errors.Is(err, source.ErrStopped) {
			log.Warn("kinesis: starting the reader of a leased shard failed", "err", err)
		}
		return
	}
	lr.mu.Lock()
	lr.owned[l.Shard] = true
	lr.read[l.Shard] = true
	delete(lr.forgotten, l.Shard) // read again (its lease reset by hand): its new blocks bring it back to the log
	lr.mu.Unlock()
	log.Info("kinesis: reading leased shard", "checkpoint", l.Checkpoint, "from", pos.String())
}

// loadState loads the state of the shard of l (stateRun.load), and
// reports whether a hand-off asked for abandoned the load (asked): one
// asked for before it started (queued, not handled yet) loads nothing.
func (lr *leaseRun) loadState(ctx context.Context, l lease.Lease) (at string, abandoned bool, err error) {
	loadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	lr.mu.Lock()
	if lr.handoffQueuedLocked(l.Shard) {
		// Asked for already: handed off unread, not loaded first.
		lr.mu.Unlock()
		return "", true, context.Canceled
	}
	lr.loading, lr.abandon = l.Shard, cancel
	lr.mu.Unlock()
	at, err = lr.state.load(loadCtx, lr, l)
	lr.mu.Lock()
	lr.loading, lr.abandon = "", nil
	lr.mu.Unlock()
	return at, err != nil && loadCtx.Err() != nil && ctx.Err() == nil, err
}

// lose stops reading a shard whose lease was lost, at once, and stops
// checkpointing it without a last checkpoint (the zombie rule: another
// worker may already process it).
func (lr *leaseRun) lose(ctx context.Context, c *control, shard string) {
	if c != nil {
		if err := c.stopShard(ctx, shard); err != nil {
			lr.log.Warn("kinesis: stopping the reader of a lost shard", "shard", shard, "err", err)
		}
	}
	if err := lr.cp.Remove(ctx, shard, nil); err != nil {
		lr.log.Warn("kinesis: unregistering a lost shard", "shard", shard, "err", err)
	}
	if lr.state != nil {
		lr.state.drop(ctx, lr, shard)
	}
	lr.forget(shard)
	lr.rn.r.progress.letGo(shard, lr.rn.clock.Now())
	lr.log.Info("kinesis: lease lost; stopped reading the shard", "shard", shard)
}

// position is where the reader of a newly leased shard starts: after its
// checkpoint, or at the position the checkpoint names (LATEST as the
// lease's first take pinned it, lease.Lease.LatestAt), but never before
// what the driver's recovery log already holds (Runtime.ResumeAfter) or
// this receiver saw completed (see run.doneUpTo).
//
// A checkpoint weir wrote (lease.Lease.WrittenByWeir) covers whole
// Kinesis records: the reader starts after it. One a KCL application wrote
// covers the user records up to (seq, subSeq), maybe not the rest of a KPL
// aggregate at seq: the reader starts at seq and leaves out the user
// records up to subSeq, as the KCL does (position.AtCheckpoint); a plain
// record at seq, sub-sequence 0, is not delivered again.
func (lr *leaseRun) position(l lease.Lease) position {
	cfg := lr.rn.cfg
	var pos position
	switch {
	case isSeq(l.Checkpoint) && l.WrittenByWeir():
		pos = position{After: l.Checkpoint}
	case isSeq(l.Checkpoint):
		pos = position{At: l.Checkpoint, AtSubSequence: max(l.SubSequence, 0), AtCheckpoint: true}
	case l.Checkpoint == checkpointer.TrimHorizon:
		pos = position{Initial: TrimHorizon}
	case l.Checkpoint == checkpointer.LatestPosition && !l.LatestAt.IsZero():
		// LATEST as its first take resolved it: whoever took it first may
		// have read and died before its first checkpoint.
		pos = position{Initial: AtTimestamp, Timestamp: l.LatestAt}
	case l.Checkpoint == checkpointer.LatestPosition:
		pos = position{Initial: Latest}
	case l.Checkpoint == checkpointer.AtTimestamp && !cfg.AtTimestamp.IsZero():
		pos = position{Initial: AtTimestamp, Timestamp: cfg.AtTimestamp}
	case l.Checkpoint == checkpointer.AtTimestamp:
		lr.log.Warn("kinesis: lease checkpoint is AT_TIMESTAMP but Config.AtTimestamp is zero; reading from TRIM_HORIZON", "shard", l.Shard)
		pos = position{Initial: TrimHorizon}
	default:
		pos = position{Initial: cfg.InitialPosition}
		if pos.Initial == AtTimestamp {
			pos.Timestamp = cfg.AtTimestamp
		}
	}
	seq, ok := lr.rn.doneUpTo(l.Shard)
	switch {
	case !ok:
	case lr.state != nil:
		// With state per shard, what this worker read of an earlier hold
		// is not in the state it loads (it was dropped): the reader starts
		// after the checkpoint or the snapshot (acquire), not after it.
	case pos.After != "" && batch.CompareSeq(seq, pos.After) <= 0:
	case pos.At != "" && batch.CompareSeq(seq, pos.At) < 0:
	default:
		pos = position{After: seq}
	}
	return pos
}

// drained is called when a shard was read to its end and all of it is
// stored.
func (lr *leaseRun) drained(ev drainEvent) { lr.queue(leaseEvent{drained: &ev}) }

// loadWait is a newly leased shard whose state waits for records of an
// earlier hold, or of its parents, to complete before it is loaded.
type loadWait struct {
	since  time.Time // when it started waiting
	warned bool      // the wait was logged at WARN (see waitToLoad)
}

// waitToLoad notes that the shard of l waits to load its state (see
// acquire): logged at INFO when the wait starts, and once at WARN if it
// lasts a checkpoint interval, as a drained shard's is (finishEnded): the
// shard is not read meanwhile, and nothing else says so.
func (lr *leaseRun) waitToLoad(log *slog.Logger, l lease.Lease) {
	now := lr.rn.clock.Now()
	lr.mu.Lock()
	if lr.waiting == nil {
		lr.waiting = make(map[string]loadWait)
	}
	w, ok := lr.waiting[l.Shard]
	if !ok {
		w.since = now
	}
	late := !w.warned && now.Sub(w.since) >= lr.cfg.CheckpointInterval
	w.warned = w.warned || late
	lr.waiting[l.Shard] = w
	lr.mu.Unlock()
	switch {
	case !ok:
		log.Info("kinesis: a newly leased shard waits for the records of its earlier hold or of its parents to complete before loading its state")
	case late:
		pending := 0
		for _, s := range append([]string{l.Shard}, l.Parents...) {
			pending += lr.rn.r.progress.pendingRanges(s)
		}
		log.Warn("kinesis: a newly leased shard still waits for the records of its earlier hold or of its parents to complete; it is not read until then",
			"parents", l.Parents, "ranges_pending", pending, "waiting", now.Sub(w.since),
			"fix", "the driver completes a batch once every output of it succeeds: find the output that fails or hangs (the pipeline's listeners are told of each failed batch)")
	}
}

// endWait is a drained shard waiting for its records to complete before
// it is marked SHARD_END.
type endWait struct {
	stored string    // its greatest stored sequence number, "" if none
	since  time.Time // when it drained
	warned bool      // the wait was logged at WARN (see finishEnded)
}

// finishEnded marks SHARD_END every drained shard whose records are all
// completed, so that its children may start: those it stored and those
// the recovery log held uncompleted at Start (see run.completedThrough),
// and those a hold of its lease read again from a snapshot behind what an
// earlier hold completed, which the greatest numbers hide
// (allAddedCompleted): the last snapshot, which the children load, must
// count them. A failed mark is tried again on the next round. A shard still waiting a
// checkpoint interval after it drained is logged once at WARN: its
// children wait with it, and nothing else says so.
func (lr *leaseRun) finishEnded(ctx context.Context) {
	now := lr.rn.clock.Now()
	lr.mu.Lock()
	var ready, waiting []string
	late := make(map[string]endWait)
	for shard, w := range lr.ending {
		switch {
		case lr.rn.completedThrough(shard, w.stored) && lr.allAddedCompleted(shard):
			ready = append(ready, shard)
		default:
			waiting = append(waiting, shard)
			if !w.warned && now.Sub(w.since) >= lr.cfg.CheckpointInterval {
				w.warned = true
				lr.ending[shard] = w
				late[shard] = w
			}
		}
	}
	lr.mu.Unlock()
	for shard, w := range late {
		done, _ := lr.rn.r.progress.latestCompleted(shard)
		lr.log.Warn("kinesis: a shard read to its end waits for its records to complete before it is marked SHARD_END; its children do not start until then",
			"shard", shard, "waits_for", lr.rn.endSeq(shard, w.stored), "completed", done,
			"ranges_pending", lr.rn.r.progress.pendingRanges(shard), "waiting", now.Sub(w.since),
			"fix", "the driver completes a batch once every output of it succeeds: find the output that fails or hangs (the pipeline's listeners are told of each failed batch)")
	}
	if seen := lr.rn.r.endChecked; seen != nil {
		for _, shard := range waiting {
			seen(shard, false)
		}
		for _, shard := range ready {
			seen(shard, true)
		}
	}
	for _, shard := range ready {
		if lr.state != nil {
			// The shard's last state, which its children start from.
			if err := lr.state.save(ctx, lr, shard, true); err != nil {
				if ctx.Err() == nil {
					lr.stateFailed(shard, err)
				}
				continue
			}
			// Stored: its part of a run of failed stores ends (saveAll,
			// which ends the others', no longer sees the shard once it
			// is finished).
			lr.stateCallOK(&lr.unsaved, shard, "kinesis: shard states are stored again")
		}
		err := lr.cp.MarkShardEnd(ctx, shard, lr.coord)
		if err != nil && !errors.Is(err, checkpointer.ErrLeaseLost) {
			if ctx.Err() == nil {
				lr.report(fmt.Errorf("kinesis: marking shard %s SHARD_END: %w", shard, err))
			}
			continue
		}
		lr.mu.Lock()
		delete(lr.ending, shard)
		delete(lr.owned, shard)
		lr.mu.Unlock()
		lr.rn.r.progress.release(shard)
		if lr.state != nil {
			lr.state.drop(ctx, lr, shard)
		}
		if err != nil {
			continue
		}
		lr.log.Info("kinesis: shard finished (SHARD_END); its children may start", "shard", shard)
		// The end is in the lease table, where a restarted reader finds
		// it: the recovery log may forget the shard.
		lr.logFinished(ctx, shard)
	}
}

// forgetFinished has the driver's recovery log forget each shard that the
// lease table shows finished for good (SHARD_END) and that this worker
// read, or whose position the log held at Start, but did not mark
// SHARD_END itself (finishEnded does that): another worker finished it,
// or this one lost its lease on the way. It waits until no reader of the
// shard runs here and every record of it this worker holds in blocks is
// completed: those added to blocks in this run and those the log held
// uncompleted at Start (run.completedThrough), so that a restart still
// recomputes exactly what a crash interrupted. Without it each worker's
// log would keep, for good, the position of every shard it once read and
// another worker finished.
func (lr *leaseRun) forgetFinished(ctx context.Context, c *control) {
	if lr.rn.finished == nil {
		return
	}
	finished := lr.coord.Finished()
	var due []string
	lr.mu.Lock()
	// Kept only while the table shows the shard finished (it drops
	// shards no longer listed), so that the set stays bounded.
	forgotten := make(map[string]bool, len(lr.forgotten))
	for _, shard := range finished {
		switch {
		case lr.forgotten[shard]:
			forgotten[shard] = true
		case !lr.owned[shard]:
			due = append(due, shard)
		}
	}
	lr.forgotten = forgotten
	lr.mu.Unlock()
	for _, shard := range due {
		if c != nil && c.reading(shard) {
			continue // a reader still runs here: its records are on their way
		}
		lr.mu.Lock()
		read := lr.read[shard]
		lr.mu.Unlock()
		if !read {
			if _, held := lr.rn.logged(shard); !held {
				lr.mu.Lock()
				lr.forgotten[shard] = true // nothing of it in the log
				lr.mu.Unlock()
				continue
			}
		}
		// Progress forgets a shard only once all it added is completed.
		added, _ := lr.rn.r.progress.latestAdded(shard)
		ready := lr.rn.completedThrough(shard, added)
		if seen := lr.rn.r.forgetChecked; seen != nil {
			seen(shard, ready)
		}
		if ready {
			lr.logFinished(ctx, shard)
		}
	}
}

// logFinished tells the driver's recovery log that shard is finished for
// good (Runtime.ShardFinished), if there is a log, so that it forgets the
// shard's position; a failure is reported, and tried again by
// forgetFinished.
func (lr *leaseRun) logFinished(ctx context.Context, shard string) {
	fin := lr.rn.finished
	if fin == nil {
		return
	}
	if err := fin(ctx, lr.rn.cfg.Stream, shard); err != nil {
		if ctx.Err() == nil {
			lr.report(fmt.Errorf("kinesis: logging shard %s finished: %w", shard, err))
		}
		return
	}
	lr.mu.Lock()
	lr.forgotten[shard] = true
	delete(lr.read, shard)
	lr.mu.Unlock()
}

// shutdown ends a graceful stop, the readers stopped and their blocks
// pushed: (0) the Coordinator stops taking leases, which this worker would
// not read, only hand back at (5), while no worker reads their shards (a
// worker draining at the same time releases its leases for the others);
// (1) it waits, at most LeaseDuration, for the driver to complete
// every block stored for the held shards, by any hold of their leases
// (the leases are renewed meanwhile), so that the last snapshots and
// checkpoints cover them; (2) it marks
// SHARD_END the shards that can be; (3) losses reported meanwhile unregister their shards; (4) the
// Checkpointer makes the last checkpoint of every held shard; (5) the
// Coordinator hands every lease back, so other workers take them at once.
// Failures are reported (ReportError), not returned: a checkpoint that
// failed only means records are read again.
func (lr *leaseRun) shutdown(ctx context.Context) {
	if err := lr.coord.StopTaking(ctx); err != nil {
		lr.report(fmt.Errorf("kinesis: giving up the hand-offs asked for: %w", err))
	}
	lr.awaitCompleted(ctx)
	lr.handleEvents(ctx, nil)
	lr.finishEnded(ctx)
	lr.handleEvents(ctx, nil)
	if lr.state != nil {
		// The snapshots first: the last checkpoints stop at them.
		lr.state.saveAll(ctx, lr, true)
	}
	if err := lr.cp.Close(ctx); err != nil {
		lr.report(fmt.Errorf("kinesis: final checkpoints: %w", err))
	}
	if err := lr.coord.Drain(ctx); err != nil {
		lr.report(fmt.Errorf("kinesis: handing leases back: %w", err))
	}
	lr.log.Info("kinesis: leases handed back after the final checkpoints")
}

// awaitCompleted waits until every owned shard's records added to blocks,
// by any hold of its lease, and those the recovery log held uncompleted at
// Start, are completed, for at most LeaseDuration or until ctx is done.
func (lr *leaseRun) awaitCompleted(ctx context.Context) {
	timer := lr.rn.clock.NewTimer(lr.cfg.LeaseDuration)
	defer timer.Stop()
	for !lr.allCompleted() {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
			lr.log.Warn("kinesis: stored records not completed within the lease duration; the last checkpoints stop short of them")
			return
		case <-lr.wake:
		}
	}
}

// allCompleted reports whether every owned shard's records added to
// blocks, and those the recovery log held uncompleted at Start, are
// completed (see completed).
func (lr *leaseRun) allCompleted() bool {
	lr.mu.Lock()
	shards := make([]string, 0, len(lr.owned))
	for s := range lr.owned {
		shards = append(shards, s)
	}
	lr.mu.Unlock()
	for _, s := range shards {
		if !lr.completed(s) {
			return false
		}
	}
	return true
}

// completed reports whether every record stored of shard is completed,
// and every record the recovery log held uncompleted at Start
// (run.completedThrough), and every range of it added to a block by any
// hold of its lease (allAddedCompleted): a hold that read again from a
// snapshot behind what an earlier hold completed stores ranges the greatest
// numbers already cover, and a drain that did not wait for them would hand
// the lease back with a last snapshot and checkpoint short of them.
func (lr *leaseRun) completed(shard string) bool {
	stored, _ := lr.rn.r.progress.latestStored(shard)
	return lr.rn.completedThrough(shard, stored) && lr.allAddedCompleted(shard)
}

// readerFailed is the failure hook of a leased shard's reader. A reader
// that cannot start at its lease's checkpoint (Kinesis refuses the
// position: a number past the shard's records, or of another shard) stops
// on its own, and the shard is refused (see refuse); the other shards go
// on. Any other error is returned as it is, to stop the receiver, and so is
// a refused position that came from the driver's recovery log rather than
// from the checkpoint (see run.notInStream): the fix is the log's, no
// shard can be read until it is made, and refusing the shards one by one
// would leave the pipeline cutting empty batches for ever.
func (lr *leaseRun) readerFailed(l lease.Lease, pos position, err error) error {
	var invalid *types.InvalidArgumentException
	if !errors.As(err, &invalid) || pos.After == "" && pos.At == "" || errors.Is(err, errNotInStream) {
		return err
	}
	lr.queue(leaseEvent{refused: &refusal{lease: l, err: err}})
	return nil
}

// refuse hands back the lease of a shard whose checkpoint Kinesis refused,
// reports it with the fix, and unregisters the shard; the Coordinator does
// not take it again until its checkpoint changes.
func (lr *leaseRun) refuse(ctx context.Context, r refusal) {
	l := r.lease
	err := fmt.Errorf("kinesis: lease table %s, item leaseKey=%q: checkpoint %s (sub-sequence %d) names no record this worker can read from, "+
		"so the shard is not read; fix: set checkpoint to a sequence number of shard %s, or to %s to read it again from its oldest record: %w",
		lr.cfg.TableName, l.Shard, l.Checkpoint, l.SubSequence, l.Shard, checkpointer.TrimHorizon, r.err)
	lr.report(err)
	if rerr := lr.coord.Refuse(ctx, l.Shard, err); rerr != nil {
		lr.log.Warn("kinesis: handing back a refused shard's lease failed; it expires", "shard", l.Shard, "err", rerr)
	}
	if rerr := lr.cp.Remove(ctx, l.Shard, nil); rerr != nil {
		lr.log.Warn("kinesis: unregistering a refused shard", "shard", l.Shard, "err", rerr)
	}
	lr.mu.Lock()
	delete(lr.owned, l.Shard)
	delete(lr.ending, l.Shard)
	lr.refused++
	lr.mu.Unlock()
	lr.rn.r.progress.release(l.Shard)
}

// refusedCount returns how many shards were refused.
func (lr *leaseRun) refusedCount() int64 {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return lr.refused
}
