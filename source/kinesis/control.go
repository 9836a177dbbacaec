package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/source"
)

// shardInfo describes a shard of the stream, as ListShards returns it.
type shardInfo struct {
	// ID is the shard ID.
	ID string
	// Parent is the shard this one was split from or merged from; "" for
	// a shard the stream was created with.
	Parent string
	// AdjacentParent is the other shard of a merge; "" otherwise.
	AdjacentParent string
	// StartingSeq is the shard's first sequence number.
	StartingSeq string
	// EndingSeq is the shard's last sequence number for a closed shard
	// (one a reshard replaced), "" for an open one.
	EndingSeq string
	// StartingHashKey and EndingHashKey are the shard's hash key range,
	// decimal, as ListShards returns it.
	StartingHashKey, EndingHashKey string
}

// parents returns the shard's parents: none, one, or two after a merge.
func (s shardInfo) parents() []string {
	var ps []string
	for _, p := range []string{s.Parent, s.AdjacentParent} {
		if p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

// position is where a shard reader starts: a checkpoint, or an initial
// position.
type position struct {
	// After, when set, starts right after this sequence number
	// (AFTER_SEQUENCE_NUMBER): a checkpoint.
	After string
	// At, when set and After is not, starts at this sequence number
	// (AT_SEQUENCE_NUMBER): a Kinesis Client Library application's
	// checkpoint, which the record itself may not be past (see
	// AtSubSequence).
	At string
	// AtSubSequence, with At, leaves out the user records of the KPL
	// aggregate at At whose sub-sequence number is <= AtSubSequence: a KCL
	// checkpoint inside an aggregate, whose first user records are
	// processed. 0 leaves out nothing unless AtCheckpoint is set: the
	// record at At is read whole.
	AtSubSequence int64
	// AtCheckpoint, with At, makes (At, AtSubSequence) a Kinesis Client
	// Library checkpoint, read as the KCL reads it: every user record at At
	// whose sub-sequence number is <= AtSubSequence is processed and left
	// out, sub-sequence 0 included. A record that is not a KPL aggregate
	// has sub-sequence number 0, so a KCL checkpoint (seq, 0) on it is not
	// delivered again.
	AtCheckpoint bool
	// Initial is the start when After and At are empty; "" means
	// TrimHorizon.
	Initial InitialPosition
	// Timestamp is the start time for Initial AtTimestamp.
	Timestamp time.Time
}

// String describes the position for logs.
func (p position) String() string {
	switch {
	case p.After != "":
		return "AFTER_SEQUENCE_NUMBER " + p.After
	case p.At != "" && (p.AtSubSequence > 0 || p.AtCheckpoint):
		return "AT_SEQUENCE_NUMBER " + p.At + " after sub-sequence " + strconv.FormatInt(p.AtSubSequence, 10)
	case p.At != "":
		return "AT_SEQUENCE_NUMBER " + p.At
	case p.Initial == AtTimestamp:
		return "AT_TIMESTAMP " + p.Timestamp.Format(time.RFC3339Nano)
	case p.Initial == "":
		return string(TrimHorizon)
	}
	return string(p.Initial)
}

// pinned returns p, or, for p at LATEST, the position AT_TIMESTAMP
// lease.LatestMargin before at, the time Kinesis resolved the reader's
// first iterator at LATEST (as a lease's first take pins it): on Kinesis's
// clock, the Date of its answer, since a time from a reader's clock
// running ahead of Kinesis's by more than the margin lies in Kinesis's
// future, where it refuses an iterator and, once that time has come,
// skips what was put before it (a fan-out reader: the Date of the answer
// to its first subscription, or of its refusal). Without a Date (a fake
// client, or a first subscription that got no answer), at is when the
// reader first asked, on its own clock. A reader that needs a new iterator before it delivered a
// record (its first one expired unused, 5 minutes after Kinesis returned
// it, while the reader waited for the byte budget or a throttled call; or
// it held back what it read) starts there, not at the shard's new tip past
// the records put meanwhile. A few seconds of records put before the
// reader started may then be delivered too.
func (p position) pinned(at time.Time) position {
	if p.After != "" || p.At != "" || p.Initial != Latest {
		return p
	}
	return position{Initial: AtTimestamp, Timestamp: at.Add(-lease.LatestMargin)}
}

// iteratorInput returns the GetShardIterator request for shard at p.
func (p position) iteratorInput(stream streamRef, shard string) *awskinesis.GetShardIteratorInput {
	in := &awskinesis.GetShardIteratorInput{StreamName: stream.name(), StreamARN: stream.arn(), ShardId: aws.String(shard)}
	switch {
	case p.After != "":
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.StartingSequenceNumber = aws.String(p.After)
	case p.At != "":
		in.ShardIteratorType = types.ShardIteratorTypeAtSequenceNumber
		in.StartingSequenceNumber = aws.String(p.At)
	case p.Initial == Latest:
		in.ShardIteratorType = types.ShardIteratorTypeLatest
	case p.Initial == AtTimestamp:
		in.ShardIteratorType = types.ShardIteratorTypeAtTimestamp
		in.Timestamp = aws.Time(p.Timestamp)
	default:
		in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
	}
	return in
}

// assigner decides which shards a receiver reads, and from where. The
// receiver runs assign in its own goroutine while Start runs; assign starts
// and stops shard readers through the control and should return nil once
// ctx is done (any other error is fatal to the receiver). Without leases it
// is allShards; with them, the lease run, which reads the shards it holds
// leases for, each from its checkpoint.
type assigner interface {
	assign(ctx context.Context, c *control) error
}

// control is what an assigner drives: the shard list, and the shard readers
// of one run of a receiver. Its methods are safe for concurrent use; it is
// valid only until the assign call it was given to returns and the receiver
// stops.
type control struct {
	run *run

	mu      sync.Mutex
	closed  bool
	group   *errgroup.Group
	ctx     context.Context // the group's: cancelled on the first reader error or on stop
	readers map[string]*readerHandle
}

// readerHandle lets StopShard stop one reader and wait for it.
type readerHandle struct {
	cancel context.CancelFunc
	done   chan struct{} // closed by the reader goroutine when it returns
}

func newControl(ctx context.Context, rn *run) *control {
	g, gctx := errgroup.WithContext(ctx)
	return &control{run: rn, group: g, ctx: gctx, readers: make(map[string]*readerHandle)}
}

// initialPosition returns the configured start for shards without a
// checkpoint.
//
// With Latest, on a restart with a recovery log (source.Runtime.LoggedUntil),
// it is AT_TIMESTAMP restartMargin before the previous Run was last seen
// alive (or before now, if that is later), on Kinesis's clock: a shard the log holds no
// position of delivered nothing before, and LATEST would skip what was put
// on it while the pipeline was down, or what its reader had not read yet
// when it stopped.
func (c *control) initialPosition() position {
	p := position{Initial: c.run.cfg.InitialPosition, Timestamp: c.run.cfg.AtTimestamp}
	if until := c.run.loggedUntil; p.Initial == Latest && !until.IsZero() {
		if now := c.run.clock.Now(); now.Before(until) {
			until = now
		}
		// On Kinesis's clock: a time in its future would be refused.
		p = position{Initial: AtTimestamp, Timestamp: until.Add(-c.run.ahead - restartMargin)}
	}
	return p
}

// restartMargin is how long before the previous Run was last seen alive a
// restart reads a shard at Latest the recovery log holds no position of:
// it covers the records put then that its reader had not delivered yet (a
// poll's wait, a read held back by the memory budget), and clocks a little
// apart. Reading earlier costs nothing but records put before the pipeline
// first started, if it was stopped within its first minute: a shard with no
// position in the log delivered none.
const restartMargin = time.Minute

// readerHooks are the lease side's hooks into one shard reader.
type readerHooks struct {
	// guard, when not nil, is asked before each delivery: the reader
	// delivers what it read only while it says lease.Held, and otherwise
	// waits and reads it again.
	guard func() lease.Hold
	// failed, when not nil, sees the error the reader stopped with and
	// returns what the reader group gets: nil keeps the other readers
	// going (a shard refused on its own).
	failed func(err error) error
}

// logHeldBack logs that a reader holds back the records it read after
// seq, for the reason h.
func logHeldBack(log *slog.Logger, h lease.Hold, seq string) {
	switch h {
	case lease.HandingOff:
		// A graceful hand-off: nothing is wrong, the new owner reads the
		// records after the last checkpoint.
		log.Info("kinesis: the shard's lease is being handed off to another worker; holding back records until its reader stops", "seq", seq)
	case lease.Unvouched:
		log.Info("kinesis: the shard's lease, just taken, is trusted once this worker's next beat succeeds; holding back records until then", "seq", seq)
	case lease.Renewing:
		log.Info("kinesis: the shard's lease is trusted once its renewal succeeds (this worker's beat was refused, or it just started); holding back records until then", "seq", seq)
	default:
		log.Warn("kinesis: lease not renewed within its duration; holding back records", "seq", seq)
	}
}

// startShard starts a reader of shardID at pos, with the lease side's
// hooks, and returns at once. It returns errShardRunning if a reader of the
// shard runs, and an error wrapping source.ErrStopped once the receiver is
// stopping. A reader stops by itself at the shard's end (see drained).
func (c *control) startShard(shardID string, pos position, hooks readerHooks) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("kinesis: starting shard %s: %w", shardID, source.ErrStopped)
	}
	if _, ok := c.readers[shardID]; ok {
		return fmt.Errorf("%w: %s", errShardRunning, shardID)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	h := &readerHandle{cancel: cancel, done: make(chan struct{})}
	c.readers[shardID] = h
	c.run.r.progress.started(shardID)
	c.group.Go(func() error {
		defer c.forget(shardID, h)
		keys, err := c.run.hashRange(ctx, shardID)
		switch {
		case err != nil:
			err = c.run.readerExit(ctx, shardID, err)
		case c.run.fanOut != nil:
			err = c.run.subscribeShard(ctx, shardID, keys, pos, hooks.guard)
		default:
			err = c.run.readShard(ctx, shardID, keys, pos, hooks.guard)
		}
		if err != nil && hooks.failed != nil {
			err = hooks.failed(err)
		}
		return err
	})
	return nil
}

// forget removes a finished reader.
func (c *control) forget(shardID string, h *readerHandle) {
	h.cancel()
	c.mu.Lock()
	if c.readers[shardID] == h {
		delete(c.readers, shardID)
	}
	c.mu.Unlock()
	c.run.r.progress.stopped(shardID, c.run.clock.Now())
	c.run.retry.stopThrottling(shardID)
	close(h.done)
}

// release tells the receiver that the assigner is done with shardID, whose
// reader stopped for good (its lease lost or handed off, or the shard
// finished): its state and counters are forgotten forgetShardAfter later
// (see forgetShards).
func (c *control) release(shardID string) {
	c.run.r.progress.release(shardID)
}

// forgetShards drops the state and counters of the shards released more
// than forgetShardAfter ago whose records are all completed (see
// progress.forget). The assigners call it on each round.
func (c *control) forgetShards() {
	c.run.r.forgetShards(c.run.clock.Now())
}

// stopShard stops the reader of shardID at once (a lease was lost) and
// waits until it returned or ctx is done. Records it already added stay in
// their blocks and are stored. Stopping a shard that is not being read does
// nothing.
func (c *control) stopShard(ctx context.Context, shardID string) error {
	c.mu.Lock()
	h, ok := c.readers[shardID]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	h.cancel()
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reading reports whether a reader of shardID runs.
func (c *control) reading(shardID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.readers[shardID]
	return ok
}

// drained returns a channel closed once a reader read shardID to its end
// and every block holding its records was stored: the shard's children may
// start.
func (c *control) drained(shardID string) <-chan struct{} {
	return c.run.r.progress.drained(shardID)
}

// changed returns a channel that receives a value (coalesced, never closed)
// when a shard drained or a reader stopped: a cue to look again.
func (c *control) changed() <-chan struct{} { return c.run.r.progress.changed }

// close stops new readers, cancels the running ones (through cancel, the
// parent of the group's context) and waits for them; it returns the first
// reader or assigner error.
func (c *control) close(cancel context.CancelFunc) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	cancel()
	return c.group.Wait()
}

// allShards is the default assigner: it reads every shard of the stream.
//
// It lists the shards at start and every Config.ShardSyncInterval. A shard
// starts once every parent of it that ListShards still returns is drained,
// so no child record is delivered before its parents' records are stored.
// A shard starts after the greatest sequence number of it in the driver's
// recovery log (source.Runtime.ResumeAfter), whose blocks the driver
// recomputes, so reading them again would only duplicate them. Otherwise, a
// shard listed
// at start starts at Config.InitialPosition, and a shard that appears later
// (made by a reshard while running) at TrimHorizon. With InitialPosition
// Latest, on a first start, a closed shard listed at start without a
// checkpoint is not read (it can get no new records) and does not hold
// back its children; on a restart Latest stands for a time before the
// previous Run was last seen alive (see initialPosition), so such a shard
// is read, from that time, since it may have closed while the pipeline
// was down. A
// shard listed at start without a position in the log, made by a reshard
// of a shard read before the restart (parentRead: one the log holds, or
// forgot as read to its end), starts at TrimHorizon whatever
// InitialPosition says, closed or not: it was made while the stream was
// read, or while the pipeline was down, and its records all come after
// those read of its parent; from InitialPosition (Latest, or a later
// AtTimestamp), the records put on it since the reshard would be lost.
//
// A closed shard listed at start that the log holds no position of, but
// one of whose descendants it does (succeeded), is not read either: it was
// read to its end before, since no shard is read before its listed
// parents are drained, and the log forgot it (forgetFinished). Reading it
// again would deliver its records twice, before children already read
// past them.
type allShards struct{}

// assign runs the shard sync loop until ctx is done.
func (allShards) assign(ctx context.Context, c *control) error {
	s := &shardSync{c: c, known: make(map[string]shardPlan)}
	ticker := c.run.clock.NewTicker(c.run.cfg.ShardSyncInterval)
	defer ticker.Stop()
	for first := true; ; first = false {
		if err := s.sync(ctx, first); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		c.forgetShards()
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		case <-c.changed():
		}
	}
}

// shardPlan is what allShards knows of one shard.
type shardPlan struct {
	shard   shardInfo
	pos     position
	skip    bool // never read: counts as drained for its children
	started bool
	done    bool // drained, and released (see control.release): counts as drained for its children
	// logged: the driver's recovery log may hold a position of the shard
	// (it held one at Start, or a record of it was added to a block), set
	// once done.
	logged bool
	// forgotten: the recovery log holds no position of the shard, and
	// will not: it was told the shard finished (forgetFinished), or never
	// held one.
	forgotten bool
}

// shardSync holds allShards' state between syncs.
type shardSync struct {
	c     *control
	known map[string]shardPlan
}

// sync lists the shards and starts every one that is ready.
func (s *shardSync) sync(ctx context.Context, first bool) error {
	shards, err := s.c.run.listShards(ctx)
	if err != nil {
		return err
	}
	listed := make(map[string]bool, len(shards))
	for _, sh := range shards {
		listed[sh.ID] = true
	}
	children := childrenOf(shards)
	byID := make(map[string]shardInfo, len(shards))
	for _, sh := range shards {
		byID[sh.ID] = sh
	}
	for _, sh := range shards {
		if _, ok := s.known[sh.ID]; ok {
			continue
		}
		plan := s.plan(sh, first)
		_, logged := s.c.run.logged(sh.ID)
		switch {
		case !first || logged:
		case sh.EndingSeq != "" && s.succeeded(sh.ID, children, nil):
			// Read to its end before the restart, then forgotten by
			// the log: see allShards.
			plan.skip, plan.forgotten = true, true
			s.c.run.logger.Info("kinesis: not reading a closed shard the recovery log forgot: a shard made from it holds a position in the log, so it was read to its end", "shard", sh.ID)
		case plan.pos.Initial != TrimHorizon && s.parentRead(sh, byID, children, nil):
			// Made by a reshard of a shard read before the restart:
			// see allShards.
			plan.pos, plan.skip = position{Initial: TrimHorizon}, false
		}
		s.known[sh.ID] = plan
	}
	for _, sh := range shards {
		plan := s.known[sh.ID]
		if plan.started || plan.skip || !s.ready(sh, listed) {
			continue
		}
		if err := s.c.startShard(sh.ID, plan.pos, readerHooks{}); err != nil {
			if errors.Is(err, source.ErrStopped) {
				return nil
			}
			return err
		}
		plan.started = true
		s.known[sh.ID] = plan
	}
	s.releaseDone()
	s.forgetFinished(ctx, shards, listed, children)
	return nil
}

// releaseDone releases every shard read that drained, listed or not (a
// shard whose records passed the retention period leaves the listing):
// ready counts it done from then on without asking for its state, and
// nothing else asks for it (see control.release).
func (s *shardSync) releaseDone() {
	for id, plan := range s.known {
		if !plan.started || plan.done {
			continue
		}
		select {
		case <-s.c.drained(id):
		default:
			continue
		}
		_, logged := s.c.run.logged(id)
		_, added := s.c.run.r.progress.latestAdded(id)
		plan.done, plan.logged = true, logged || added
		s.known[id] = plan
		s.c.release(id)
	}
}

// childrenOf returns the IDs of the listed children of each listed shard
// that has some.
func childrenOf(shards []shardInfo) map[string][]string {
	out := make(map[string][]string)
	for _, sh := range shards {
		for _, p := range sh.parents() {
			out[p] = append(out[p], sh.ID)
		}
	}
	return out
}

// succeeded reports whether a listed descendant of shard id (children
// gives the listed children of each listed shard) has a position in the
// driver's recovery log: one held at Start (Runtime.ResumeAfter) or a
// record of it in a completed batch (whose block the log holds), unless the
// log was told it finished since. No shard is read before its listed
// parents are drained, so the shard was read to its end (or never needed
// reading: a closed shard skipped at LATEST), and a restart that finds the
// descendant there too knows it without the shard's own position (see
// allShards). A restart lists at least the descendant: a shard closed
// later leaves the listing later, its records being younger. seen guards
// the walk; nil starts one.
func (s *shardSync) succeeded(id string, children map[string][]string, seen map[string]bool) bool {
	if seen == nil {
		seen = make(map[string]bool)
	}
	for _, c := range children[id] {
		if seen[c] {
			continue
		}
		seen[c] = true
		if s.holds(c) || s.succeeded(c, children, seen) {
			return true
		}
	}
	return false
}

// parentRead reports whether a parent of sh was read before this run, as
// the driver's recovery log shows at Start: it holds a position of the
// parent (listed or not), or the parent is listed, closed, and a
// descendant of it holds one (succeeded), or the parent was made by a
// reshard of a shard read before (byID and children give the listing). Such a shard's records
// come after what was read, and a restart reads it from its start (see
// allShards). seen guards the walk; nil starts one.
func (s *shardSync) parentRead(sh shardInfo, byID map[string]shardInfo, children map[string][]string, seen map[string]bool) bool {
	if seen == nil {
		seen = make(map[string]bool)
	}
	for _, p := range sh.parents() {
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, ok := s.c.run.logged(p); ok {
			return true // listed or not: trimmed away since
		}
		if ps, listed := byID[p]; listed && (ps.EndingSeq != "" && s.succeeded(p, children, nil) || s.parentRead(ps, byID, children, seen)) {
			return true
		}
	}
	return false
}

// holds reports whether the driver's recovery log holds a position of
// shard id, as far as this run knows (see succeeded).
func (s *shardSync) holds(id string) bool {
	if s.known[id].forgotten {
		return false
	}
	if _, ok := s.c.run.logged(id); ok {
		return true
	}
	_, ok := s.c.run.r.progress.latestCompleted(id)
	return ok
}

// forgetFinished has the driver's recovery log forget each shard that is
// finished for good (Runtime.ShardFinished), so that the log does not keep
// every shard a resharded stream ever had: a shard read to its end here,
// or the unlisted parent of a listed shard that the log held a position of
// at Start. Its records must all be completed, those added here and those
// the log held uncompleted at Start (run.completedThrough), so that a
// restart still recomputes exactly what a crash interrupted; and a restart
// must not read it again, which without a lease table's SHARD_END means
// either that Kinesis no longer lists it (its records passed the retention
// period: a restart does not find it, and its children do not wait for
// it), or that a listed descendant of it holds a position in the log
// (succeeded: a restart skips it). A failure is logged and tried again at
// the next sync.
func (s *shardSync) forgetFinished(ctx context.Context, shards []shardInfo, listed map[string]bool, children map[string][]string) {
	rn := s.c.run
	if rn.finished == nil {
		return
	}
	for _, sh := range shards {
		for _, p := range sh.parents() {
			if _, ok := s.known[p]; !ok && !listed[p] {
				// Trimmed away before this run listed it: never read
				// here, its position held since an earlier run, if any.
				_, logged := rn.logged(p)
				s.known[p] = shardPlan{shard: shardInfo{ID: p}, skip: true, done: true, logged: logged}
			}
		}
	}
	for id, plan := range s.known {
		if !plan.done || plan.forgotten {
			continue
		}
		added, _ := rn.r.progress.latestAdded(id) // "" once forgotten, all of it completed (progress.forget)
		ready := plan.logged && rn.completedThrough(id, added) && (!listed[id] || s.succeeded(id, children, nil))
		if seen := rn.r.forgetChecked; seen != nil && plan.logged {
			seen(id, ready)
		}
		switch {
		case !plan.logged:
			plan.forgotten = true // nothing of it in the log
		case !ready:
			continue
		default:
			if err := rn.finished(ctx, rn.cfg.Stream, id); err != nil {
				if ctx.Err() == nil {
					rn.logger.Warn("kinesis: logging a finished shard in the recovery log failed; trying again at the next shard sync", "shard", id, "err", err)
				}
				continue
			}
			plan.forgotten = true
			rn.logger.Info("kinesis: shard finished; the recovery log forgets it", "shard", id)
		}
		s.known[id] = plan
	}
}

// plan decides where a newly listed shard starts.
func (s *shardSync) plan(sh shardInfo, first bool) shardPlan {
	seq, ok := s.c.run.logged(sh.ID)
	switch {
	case ok:
		return shardPlan{shard: sh, pos: position{After: seq}}
	case !first:
		return shardPlan{shard: sh, pos: position{Initial: TrimHorizon}}
	}
	pos := s.c.initialPosition()
	return shardPlan{shard: sh, pos: pos, skip: pos.Initial == Latest && sh.EndingSeq != ""}
}

// ready reports whether every listed parent of sh is done with.
func (s *shardSync) ready(sh shardInfo, listed map[string]bool) bool {
	for _, p := range sh.parents() {
		if !listed[p] {
			continue // trimmed away: its records are gone anyway
		}
		plan, ok := s.known[p]
		if !ok || plan.skip || plan.done {
			continue
		}
		if !plan.started {
			return false
		}
		select {
		case <-s.c.drained(p):
		default:
			return false
		}
	}
	return true
}
