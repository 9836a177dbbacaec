package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
)

// A worker's liveness, without RenewEveryLease (the default): the worker
// proves it runs by its beat on the beat board (board.go) every
// RenewInterval, a write that also shows it every other worker's beat, and
// every worker judges all the leases of another by that: an owner is alive
// while its beat, or some lease it owns (counter or owner), changed less
// than LeaseDuration ago on the observer's clock. An owner without a beat
// on the board (a weir worker that has not beaten yet, or of a version
// before the board) is judged by the lease of it that changed last, read
// on its own. An observer reads the table whole only now and then
// (ScanInterval) or when something calls for it: at start, while it has
// leases to take or steal, when an owner's beat stops changing (a
// suspected death: the scan confirms it and takes the leases) or goes (a
// drain), when the board's item goes, and after this worker finished a
// shard. A worker without leases reads the board once per TakeInterval.
// The cost per worker is one write per RenewInterval (none without
// leases) and, without leases, one read per TakeInterval, whatever the
// number of workers and leases.
//
// A lease this worker holds stays valid (Holds) while its beat succeeds
// within LeaseDuration of the lease's previous renewal, as every lease is
// with per-lease renewals. After a longer gap (a pause), a refused beat
// (another worker took this one for dead) or the first beat of an
// incarnation, each held lease is renewed once more, conditionally, before
// it is trusted again: one taken meanwhile is lost, its reader stopped.

// beatSeen is a beat of another incarnation as last seen on the board, and
// when it last changed on this worker's clock.
type beatSeen struct {
	beatVal
	on      string // the lease item it is on
	changed time.Time
}

// scanDue reports whether the next take cycle must scan the table: a scan
// was asked for, none ran yet, or the last one is ScanInterval old.
func (c *Coordinator) scanDue() bool {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.needScan || c.lastScan.IsZero() || now.Sub(c.lastScan) >= c.cfg.ScanInterval
}

// scannedLocked records a full scan; busy (it planned takes) asks for another at
// the next take cycle, until the worker has what it should, and so does a
// request made while the scan ran. c.mu must be held.
func (c *Coordinator) scannedLocked(busy bool) {
	c.lastScan = c.cfg.Clock.Now()
	c.needScan = c.needScan || busy
}

// seeLocked records l as observed at now: its change time, and its owner's
// if the owner does not beat. c.mu must be held.
func (c *Coordinator) seeLocked(l Lease, now time.Time) {
	s, ok := c.seen[l.Shard]
	if !ok || s.lease.Counter != l.Counter || s.lease.Owner != l.Owner {
		s.changed = now
		// An owner that beats is judged by its beat, not by a change of
		// counter seen only at a scan, minutes after it was written, which
		// would make a dead owner look alive for another LeaseDuration;
		// but a lease that changed hands is news of its new owner (a
		// worker that held nothing for a while has a beat that stood
		// still until it beats again).
		if l.Owner != "" && (!c.beatsLocked(l.Owner) || !ok || s.lease.Owner != l.Owner) {
			c.ownerChanged[l.Owner] = now
		}
	}
	if !slices.Equal(s.lease.Parents, l.Parents) {
		c.treeChangedLocked() // an ancestor not listed: its parents are its lease's
	}
	s.lease = l
	c.seen[l.Shard] = s
	c.knowLocked(l)
}

// ownerAliveLocked reports whether some lease owner owns changed less than
// LeaseDuration ago. c.mu must be held.
func (c *Coordinator) ownerAliveLocked(owner string, now time.Time) bool {
	t, ok := c.ownerChanged[owner]
	return ok && now.Sub(t) < c.cfg.LeaseDuration
}

// watchLocked picks, for each other owner in the last scan, the lease to
// read between scans if it has no beat: the one of it that changed last
// (an older weir's renewed lease, or a KCL worker's most recent renewal),
// ties broken by shard ID. It forgets
// owners that own nothing any more. c.mu must be held.
func (c *Coordinator) watchLocked() {
	watch := make(map[string]string)
	for shard, s := range c.seen {
		o := s.lease.Owner
		if o == "" || o == c.cfg.WorkerID || s.lease.Checkpoint == checkpointer.ShardEnd {
			continue
		}
		cur, ok := watch[o]
		if !ok {
			watch[o] = shard
			continue
		}
		if d := s.changed.Compare(c.seen[cur].changed); d > 0 || d == 0 && shard < cur {
			watch[o] = shard
		}
	}
	for o := range c.ownerChanged {
		if _, ok := watch[o]; !ok && o != c.cfg.WorkerID {
			delete(c.ownerChanged, o)
		}
	}
	c.watch = watch
}

// seeBeatsLocked records beats read from the board at now. A read of the
// item as written (consistent: this worker's own beat, or a scan) shows
// each beat as it is, so any difference is a change, and a beat that went
// is gone: when it was the last of a worker that owns leases, that calls
// for a scan (the worker drained them, or was forgotten). An eventually
// consistent read may be older than what was seen, so only a higher beat
// is a change there. Beats of this worker's earlier incarnations are kept
// only to be forgotten. A view of one item, viewed, drops only the beats
// seen on that item; a scan's (viewed "") names the item of each beat in
// on. c.mu must be held.
func (c *Coordinator) seeBeatsLocked(beats map[string]beatVal, viewed string, on map[string]string, consistent bool, now time.Time) {
	for name, b := range beats {
		if name == c.beatName {
			continue
		}
		item := viewed
		if viewed == "" {
			item = on[name]
		}
		s, ok := c.beats[name]
		s.on = item
		if !ok || b.n > s.n || consistent && b.n != s.n {
			s = beatSeen{beatVal: b, on: item, changed: now}
			if b.worker != c.cfg.WorkerID {
				c.ownerChanged[b.worker] = now
			}
		}
		c.beats[name] = s
	}
	for name, s := range c.beats {
		if _, ok := beats[name]; ok || viewed != "" && s.on != viewed {
			continue
		}
		delete(c.beats, name)
		if _, owns := c.watch[s.worker]; owns && !c.beatsLocked(s.worker) {
			c.needScan = true
		}
	}
}

// beatsLocked reports whether worker has a beat on the board, as last seen.
// c.mu must be held.
func (c *Coordinator) beatsLocked(worker string) bool {
	for _, s := range c.beats {
		if s.worker == worker {
			return true
		}
	}
	return false
}

// checkOwners judges each other owner alive or not, and reports whether a
// full scan is needed: an owner looks dead (neither its beat nor a lease
// of it changed for LeaseDuration), or its beat went (seeBeatsLocked). It
// uses the beats this worker's own beat read; without a recent one (no
// leases) it reads the board, eventually consistently (peekBoard). An
// owner without a beat is judged by its watched lease (checkLease).
func (c *Coordinator) checkOwners(ctx context.Context) bool {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	board := c.board
	stale := now.Sub(c.boardRead) > c.cfg.RenewInterval+c.cfg.TakeInterval
	c.mu.Unlock()
	if board != "" && stale {
		beats, ok, err := c.table.peekBoard(ctx, board)
		switch {
		case err != nil:
			c.callFailed(ctx, callBoard, "", "leasetable: reading the beat board failed; retrying next period: other workers' liveness is not judged, nor their leases taken over if they die, until it succeeds", err, "board", board)
		case !ok:
			c.callSucceeded(callBoard, "")
			c.mu.Lock()
			c.board, c.needScan = "", true
			c.mu.Unlock()
		default:
			c.callSucceeded(callBoard, "")
			c.mu.Lock()
			c.seeBeatsLocked(beats, board, nil, false, c.cfg.Clock.Now())
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	need := c.needScan
	now = c.cfg.Clock.Now()
	unbeaten := make(map[string]string)
	for owner, shard := range c.watch {
		if !c.beatsLocked(owner) {
			unbeaten[owner] = shard
		} else if !c.ownerAliveLocked(owner, now) {
			need = true
		}
	}
	c.mu.Unlock()
	for owner, shard := range unbeaten {
		if c.checkLease(ctx, owner, shard) {
			need = true
		}
	}
	return need
}

// checkLease reads owner's watched lease shard, eventually consistently
// (peek), and reports whether a full scan is needed: owner looks dead, or
// the lease moved, went or cannot be read.
func (c *Coordinator) checkLease(ctx context.Context, owner, shard string) bool {
	l, ok, err := c.table.peek(ctx, shard)
	if err != nil {
		var bad *leasetable.BadItemError
		if errors.As(err, &bad) {
			return true
		}
		c.callFailed(ctx, callPeek, shard, "leasetable: reading another worker's lease failed; retrying next period: that worker's liveness is not judged until it succeeds", err, "shard", shard)
		return false
	}
	c.callSucceeded(callPeek, shard)
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, seen := c.seen[shard]; ok && seen && l.Counter < s.lease.Counter {
		// An eventually consistent read older than what was seen: no
		// news, neither a change nor a move.
		return false
	}
	if ok {
		c.seeLocked(l, now)
	}
	return !ok || l.Owner != owner || !c.ownerAliveLocked(owner, now)
}

// beat writes this worker's beat on the board, if it holds leases, and
// extends, on success, every held lease still within LeaseDuration of its
// last renewal. A held lease past it (a pause) is renewed on its own
// (renewEach) before it is trusted again, and so is every lease after the
// first beat of an incarnation or when there is no board to beat on. A beat
// refused only because one of its own attempts landed, its answer lost,
// goes on (ownBeatLanded). A beat
// refused because another worker removed it (errBeatRefused) starts a new
// incarnation on the same board at once, so that the others see this
// worker alive without a gap; one refused because the board's item is gone
// leaves the board to the next scan. A beat that keeps failing for
// LeaseDuration loses every lease, as per-lease renewals would.
func (c *Coordinator) beat(ctx context.Context) {
	c.mu.Lock()
	if len(c.held) == 0 {
		c.mu.Unlock()
		return
	}
	c.beatSeq++
	seq := c.beatSeq
	board := c.board
	var old, oldOn string // an incarnation left on the board the last scan moved from
	if board != "" && (c.beatName == "" || c.beatOn != board) {
		if c.beatName != "" && c.beatOn != "" {
			old, oldOn = c.beatName, c.beatOn
		}
		c.newIncarnationLocked(board)
	}
	c.mu.Unlock()
	if board == "" {
		c.renewEach(ctx)
		return
	}
	if old != "" {
		if err := c.table.unbeat(ctx, oldOn, old, c.cfg.WorkerID); err != nil && !errors.Is(err, errBeatRefused) && ctx.Err() == nil {
			c.log.Debug("leasetable: removing this worker's beat from the previous board failed; it is forgotten in time", "board", oldOn, "err", err)
		}
	}
	sent := c.cfg.Clock.Now()
	prev, notices, err := c.beatOnce(ctx, board)
	if errors.Is(err, errBeatRefused) && c.ownBeatLanded(ctx, board, prev) {
		// Refused only because this very beat, or the last one, which
		// got no answer, was applied: the beat goes on from there. prev
		// is kept: a first beat still vouches for nothing.
		_, notices, err = c.beatOnce(ctx, board)
	}
	if errors.Is(err, errBeatRefused) && prev > 0 {
		c.log.Info("leasetable: beat refused (another worker took this one for dead); renewing each lease before trusting it", "board", board)
		c.mu.Lock()
		c.unvouchLocked()
		c.newIncarnationLocked(board)
		c.mu.Unlock()
		prev, notices, err = c.beatOnce(ctx, board)
	}
	now := c.cfg.Clock.Now()
	if err == nil || errors.Is(err, errBeatRefused) {
		c.callSucceeded(callBeat, "") // DynamoDB answered
	}
	switch {
	case err == nil:
		stale := prev == 0 // a new incarnation vouches for nothing yet
		c.mu.Lock()
		for _, o := range c.held {
			if prev > 0 && o.retakenAt != 0 && seq >= o.retakenAt {
				o.retakenAt = 0 // this beat, sent after the retake, proves no one took this worker for dead since
			}
			if prev > 0 && !o.unvouched && now.Sub(o.renewed) < c.cfg.LeaseDuration {
				if sent.After(o.renewed) {
					o.renewed = sent
				}
			} else {
				stale = true
			}
		}
		if stale {
			c.unvouchLocked()
		}
		c.mu.Unlock()
		c.actOnNotices(ctx, board, notices)
		if stale {
			c.renewEach(ctx)
			if prev == 0 { // a renewal after a new incarnation's first beat
				c.mu.Lock()
				for _, o := range c.held {
					if o.retakenAt != 0 && seq >= o.retakenAt && !o.renewed.Before(sent) {
						o.retakenAt = 0
					}
				}
				c.mu.Unlock()
			}
		}
	case errors.Is(err, errBeatRefused): // a fresh attribute refused: the item is gone
		c.log.Info("leasetable: the beat board's item is gone; renewing each lease until the next scan picks another", "board", board)
		c.mu.Lock()
		c.board, c.beatName, c.beatOn, c.needScan = "", "", "", true
		c.unvouchLocked()
		c.mu.Unlock()
		c.renewEach(ctx)
	case ctx.Err() != nil:
	default:
		c.mu.Lock()
		if prev == 0 {
			// The first beat may have landed: the incarnation is dropped
			// rather than written again, so that no attribute of it
			// ever stands on two items or twice on one.
			c.beatName, c.beatOn = "", ""
		}
		var gone []string
		for s, o := range c.held {
			if now.Sub(o.renewed) >= c.cfg.LeaseDuration {
				gone = append(gone, s)
			}
		}
		c.mu.Unlock()
		if len(gone) > 0 {
			// This worker's own failure, not another worker's take (INFO):
			// it stops reading the shards because DynamoDB fails it.
			slices.Sort(gone)
			c.log.Warn("leasetable: beat failed for a lease duration; the leases it vouched for are lost, other workers may take them",
				append([]any{"board", board, "shards", gone}, c.lossFix(ctx, callBeat, "", err)...)...)
			c.countFailure(callBeat, "", err) // warned just now
		}
		for _, s := range gone {
			c.mu.Lock()
			o := c.held[s]
			c.mu.Unlock()
			if o != nil {
				c.lose(s, o, fmt.Errorf("not renewed for %v, other workers may take it: %w", c.cfg.LeaseDuration, err))
			}
		}
		if len(gone) == 0 {
			c.callFailed(ctx, callBeat, "", "leasetable: beat failed; retrying next period: the leases are lost if it fails for a lease duration", err, "board", board)
		}
	}
}

// ownBeatLanded reports whether a beat of this incarnation on board,
// conditional on prev and refused, was refused only because a beat of it
// conditional on prev had been applied, its answer lost (the SDK sent it
// again, and the retry failed the condition the first attempt had moved
// on; or an earlier beat got no answer): the beat read back is prev+1.
// Only this incarnation adds to its attribute, and a worker that takes it
// for dead removes it, so that value is this worker's own write, and
// proves that no other worker took it for dead since its previous beat.
// It then records the beat as prev+1, for the next one to go on from
// there, rather than starting a new incarnation and renewing every lease.
// A read that fails reports false: the refusal stands.
func (c *Coordinator) ownBeatLanded(ctx context.Context, board string, prev int64) bool {
	c.mu.Lock()
	name := c.beatName
	c.mu.Unlock()
	n, err := c.table.readBeat(ctx, board, name)
	if err != nil || n != prev+1 {
		return false
	}
	c.log.Debug("leasetable: a beat was written, its answer lost; the beat goes on", "board", board, "beat", n)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.beatName != name {
		return false
	}
	c.myBeat = n
	return true
}

// unvouchLocked marks every held lease as not to be extended by a beat
// until its own next conditional write succeeds. c.mu must be held.
func (c *Coordinator) unvouchLocked() {
	for _, o := range c.held {
		o.unvouched = true
	}
}

// newIncarnationLocked starts a new incarnation of this worker's beat, on
// board: a fresh attribute, whose first beat must find it absent. c.mu must
// be held.
func (c *Coordinator) newIncarnationLocked(board string) {
	c.beatName, c.beatOn, c.myBeat = beatAttr(c.cfg.WorkerID, newIncarnation()), board, 0
}

// beatOnce sends one beat of the current incarnation on board and, on
// success, records what its answer shows. It returns the value the beat
// was conditional on (0 for an incarnation's first) and the steal notices
// for this worker. The write is abandoned when the held lease renewed
// longest ago expires.
func (c *Coordinator) beatOnce(ctx context.Context, board string) (prev int64, notices []string, err error) {
	c.mu.Lock()
	name, prev, acks := c.beatName, c.myBeat, c.acks
	forget, orphans := c.forgetLocked()
	var first *heldLease
	for _, h := range c.held {
		if first == nil || h.renewed.Before(first.renewed) {
			first = h
		}
	}
	c.mu.Unlock()
	if first == nil {
		return prev, nil, fmt.Errorf("leasetable: beat: no lease held")
	}
	sent := c.cfg.Clock.Now()
	wctx, cancel := c.untilExpiry(ctx, first)
	beats, notices, orphans, err := c.table.beat(wctx, board, name, c.cfg.WorkerID, prev, acks, forget, orphans)
	err = c.expiredError(wctx, err)
	cancel()
	if err != nil {
		return prev, nil, err
	}
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	c.boardRead, c.myBeat, c.orphans, c.lastBeat = now, beats[name].n, orphans, sent
	c.seeBeatsLocked(beats, board, nil, true, now)
	c.mu.Unlock()
	return prev, notices, nil
}

// forgetLocked returns what the next beat removes from the board: the
// attributes of the beats that stood still for beatForgetAfter
// LeaseDurations or are of earlier workers of StateDir, known gone, and of
// the notices of each worker left without a beat; and the notices the
// last beat saw of workers without a beat on it (orphans), deleted one by
// one; nothing unless this worker's view of the board is recent. c.mu must
// be held.
func (c *Coordinator) forgetLocked() (forget []string, orphans map[string][]string) {
	now := c.cfg.Clock.Now()
	if now.Sub(c.boardRead) > c.cfg.RenewInterval+c.cfg.TakeInterval {
		// No recent view: this worker was paused or failing, and what
		// stood still meanwhile stood still only to it.
		return nil, nil
	}
	kept := make(map[string]bool)
	gone := make(map[string]bool)
	for name, s := range c.beats {
		if s.on != c.beatOn {
			continue // on another item: not this write's to remove
		}
		if c.dead[s.worker] || now.Sub(s.changed) >= beatForgetAfter*c.cfg.LeaseDuration {
			forget = append(forget, name)
			gone[s.worker] = true
		} else {
			kept[s.worker] = true
		}
	}
	for w := range gone {
		if !kept[w] && w != c.cfg.WorkerID {
			forget = append(forget, noticeAttr(w))
		}
	}
	slices.Sort(forget)
	return slices.Compact(forget), c.orphans
}

// actOnNotices acts on the steal notices for this worker on the board (see
// noteSteal): a held lease a notice names at a counter above the one this
// worker last wrote was stolen, so it is lost now, its reader stopped,
// rather than at its next checkpoint or scan. A notice of a lease this
// worker took back since (a higher counter) is stale and ignored. Every
// notice read is deleted by the next beat.
func (c *Coordinator) actOnNotices(ctx context.Context, board string, notices []string) {
	c.mu.Lock()
	c.acks = notices
	type loss struct {
		shard string
		h     *heldLease
		by    int64
	}
	var lost []loss
	for _, n := range notices {
		shard, counter, ok := parseStealNotice(n)
		if h := c.held[shard]; ok && h != nil && h.lease.Counter < counter {
			lost = append(lost, loss{shard, h, counter})
		}
	}
	c.mu.Unlock()
	for _, l := range lost {
		// Asked for (a hand-off) or taken? The lease tells; a read that
		// fails counts as taken.
		if nl, ok, err := c.table.Get(ctx, l.shard); err == nil && ok && nl.Owner != c.cfg.WorkerID && nl.CheckpointOwner == c.cfg.WorkerID {
			c.mu.Lock()
			now := c.held[l.shard] == l.h && c.handoffLocked(l.shard, l.h, nl)
			c.mu.Unlock()
			if now {
				c.handOffNow(ctx, nl)
			}
			continue
		}
		c.lose(l.shard, l.h, fmt.Errorf("another worker stole it (counter %d; notice on the beat board %s): %w", l.by, board, checkpointer.ErrLeaseLost))
	}
}

// noteSteal tells owner, whose lease l this worker just stole (now at
// counter), of the steal, by a notice on the item its latest beat is on:
// the owner's reader of the shard then stops at its next beat instead of
// its next checkpoint of the shard or scan, which cuts the records both
// workers deliver. One write per steal, for an owner that beats (an owner
// renewing each lease learns at its next renewal); a failed write is tried
// again at the next take cycles, a few times: a notice lost at last only
// leaves the old way.
func (c *Coordinator) noteSteal(ctx context.Context, l Lease, counter int64) {
	if l.Owner == "" || l.Owner == c.cfg.WorkerID {
		return
	}
	c.sendNotice(ctx, stealNote{owner: l.Owner, shard: l.Shard, counter: counter})
}

// stealNote is a steal notice to write: shard, now at counter, was stolen
// from owner; tries counts the writes that failed.
type stealNote struct {
	owner, shard string
	counter      int64
	tries        int
}

// maxNoticeTries bounds the writes of one steal notice: one per take cycle.
const maxNoticeTries = 5

// sendNotice writes n where its owner beats, and keeps it to be written
// again at the next take cycles (retryNotices) if the write fails.
func (c *Coordinator) sendNotice(ctx context.Context, n stealNote) {
	c.mu.Lock()
	var on string
	var latest time.Time
	for _, s := range c.beats {
		if s.worker == n.owner && s.on != "" && (on == "" || s.changed.After(latest)) {
			on, latest = s.on, s.changed
		}
	}
	if on == "" {
		// No beat yet (it took its leases since its last beat): its
		// first beat goes on the board, where it reads the notice.
		on = c.board
	}
	alive := c.ownerAliveLocked(n.owner, c.cfg.Clock.Now())
	c.mu.Unlock()
	if on == "" || !alive {
		return // a dead owner reads nothing
	}
	err := c.table.noteSteal(ctx, on, n.owner, n.shard, n.counter)
	if err == nil || ctx.Err() != nil {
		return
	}
	c.log.Debug("leasetable: steal notice not written", "shard", n.shard, "owner", n.owner, "err", err)
	if n.tries++; n.tries < maxNoticeTries {
		c.mu.Lock()
		c.unsent = append(c.unsent, n)
		c.mu.Unlock()
	}
}

// retryNotices writes again the steal notices whose write failed, for the
// leases this worker still holds or still asks for (a hand-off asked for
// is pending, not held, until its holder hands it off: the notice is how
// the holder learns of it before its next scan).
func (c *Coordinator) retryNotices(ctx context.Context) {
	c.mu.Lock()
	notes := c.unsent
	c.unsent = nil
	c.mu.Unlock()
	for _, n := range notes {
		c.mu.Lock()
		_, held := c.held[n.shard]
		_, asked := c.pending[n.shard]
		c.mu.Unlock()
		if held || asked {
			c.sendNotice(ctx, n)
		}
	}
}

// unbeat removes this worker's beat from the board after a drain, so the
// other workers scan and take the released leases at once. Best effort:
// without it they take them once the beat stands still for LeaseDuration.
func (c *Coordinator) unbeat(ctx context.Context) {
	c.mu.Lock()
	board, name, beaten := c.beatOn, c.beatName, c.myBeat > 0
	c.mu.Unlock()
	if c.cfg.RenewEveryLease || board == "" || !beaten {
		return
	}
	if err := c.table.unbeat(ctx, board, name, c.cfg.WorkerID); err != nil {
		c.log.Warn("leasetable: removing this worker's beat failed; other workers take its released leases once it stands still", "board", board, "err", err)
	}
}
