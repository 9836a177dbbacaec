package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"

	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/clock"
)

// renewParallelism bounds the lease writes one renew, take or shard sync
// cycle runs at once.
const renewParallelism = 8

// ShardInfo describes a shard of the stream, as the caller lists it.
type ShardInfo struct {
	// ID is the shard ID.
	ID string
	// ParentIDs are the shard's parents: none, one, or two after a merge.
	ParentIDs []string
	// StartingHashKey and EndingHashKey are the shard's hash key range,
	// decimal; stored in a new lease as the KCL stores them. Optional.
	StartingHashKey, EndingHashKey string
}

// CoordinatorConfig configures a Coordinator: the lease settings (leasetable.Config,
// where TableName and DynamoDB are required) and the wiring to the caller.
// The zero value of each optional field means its documented default.
type CoordinatorConfig struct {
	leasetable.Config
	// ListShards, if set, is called at start and every ShardSyncInterval; its
	// result is passed to SyncShards. Without it, the caller calls SyncShards.
	ListShards func(ctx context.Context) ([]ShardInfo, error)
	// ShardSyncInterval is how often ListShards is called. Default
	// DefaultShardSyncInterval (1m).
	ShardSyncInterval time.Duration
	// InitialPosition is the checkpoint of a new lease whose shard has no
	// known parent: checkpointer.LatestPosition (default, as KCL and the Kinesis
	// receiver), checkpointer.TrimHorizon, or checkpointer.AtTimestamp (the timestamp itself is the
	// caller's). Leases of child shards always start at checkpointer.TrimHorizon, so no
	// record is skipped.
	InitialPosition string
	// OnAcquired is called with each lease this worker takes; the reader of
	// the shard starts after lease.Checkpoint. Optional. Callbacks run one
	// at a time, in order, on a goroutine Run owns; one that blocks delays
	// the later events (not renewals).
	OnAcquired func(l Lease)
	// OnLost is called with each shard whose lease this worker lost (another
	// worker took it, or it could not be renewed within LeaseDuration); the
	// shard must stop at once and must not be checkpointed. Optional.
	OnLost func(shard string)
	// OnBadItem is called with each item of the table that cannot be read
	// as a lease, once when a scan first finds it so and again if its
	// problem changes; the item is left alone (never taken) and every
	// other shard goes on. Optional; the Coordinator also logs it at
	// ERROR. It runs like OnAcquired.
	OnBadItem func(err *leasetable.BadItemError)
	// OnHandoff is called with each shard whose lease another worker asked
	// for (a steal towards balance): the caller stops reading the shard at
	// once, lets what it read complete, commits its last checkpoint
	// (Commit) and then calls HandOff, so the new owner starts from there
	// and delivers nothing twice. Holds is false for the shard from then
	// on. A worker that does not hand off within LeaseDuration of the
	// request has the lease taken. Optional: without it, the lease is
	// handed off at once and reported lost (OnLost). It runs like
	// OnAcquired.
	OnHandoff func(shard string)
	// Clock is the time source of every period and of lease expiry.
	// Default clock.Real{}.
	Clock clock.Clock
	// Logger receives lease changes and errors. Default slog.Default().
	Logger *slog.Logger
}

func (c *CoordinatorConfig) setDefaults() {
	c.Config = WithDefaults(c.Config)
	c.ShardSyncInterval = cmp.Or(c.ShardSyncInterval, DefaultShardSyncInterval)
	if c.InitialPosition == "" {
		c.InitialPosition = checkpointer.LatestPosition
	}
	c.Clock = clock.Or(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// validate reports every problem of a config with defaults applied.
func (c CoordinatorConfig) validate() error {
	problems := TableConfig{Name: c.TableName, Client: c.DynamoDB}.problems()
	problems = append(problems, Problems(c.Config)...)
	if c.ShardSyncInterval < 0 {
		problems = append(problems, fmt.Errorf("ShardSyncInterval %v: must be > 0 (0 means %v)", c.ShardSyncInterval, DefaultShardSyncInterval))
	}
	switch c.InitialPosition {
	case checkpointer.LatestPosition, checkpointer.TrimHorizon, checkpointer.AtTimestamp:
	default:
		problems = append(problems, fmt.Errorf("InitialPosition %q: must be %s, %s or %s", c.InitialPosition, checkpointer.LatestPosition, checkpointer.TrimHorizon, checkpointer.AtTimestamp))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", leasetable.ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// Coordinator runs one worker's side of the lease protocol on the lease
// table (DESIGN.md, section Leases) and is the checkpointer.Committer that writes this worker's
// checkpoints. It is safe for concurrent use.
//
// Lease changes are reported through OnAcquired and OnLost, in the order they
// happen, from one goroutine that Run owns, never under a lock; a callback may
// call any method of the Coordinator or of a Checkpointer.
type Coordinator struct {
	cfg   CoordinatorConfig
	table *Table
	log   *slog.Logger

	drained chan struct{} // closed by Drain
	// gone is closed, and goneErr set, once a periodic call found the
	// lease table deleted (tableGone): Run returns goneErr.
	gone    chan struct{}
	goneErr error
	// skewWarned is set once this worker's clock was said to be off
	// DynamoDB's (latestPin).
	skewWarned atomic.Bool
	// parentReadRefused is set while checkParents's reads are refused
	// (said once, see checkParents).
	parentReadRefused atomic.Bool

	mu          sync.Mutex
	held        map[string]*heldLease
	seen        map[string]seenLease
	events      []leaseEvent
	wake        chan struct{} // 1-slot: events were queued
	draining    bool          // no more takes (StopTaking, Drain)
	drainCalled bool
	running     bool
	dead        map[string]bool   // earlier workers of StateDir, gone: their leases are free
	bad         map[string]string // unreadable items in the last scan: leaseKey -> problem
	refused     map[string]string // shards refused (Refuse) -> the checkpoint refused
	state       *workerState      // StateDir's, while Run runs

	// Periodic calls that fail (periodic.go): kind of call -> its
	// failures in a row (callFailed).
	failing map[string]*failStreak

	// Liveness without RenewEveryLease (liveness.go).
	board        string               // the beat board: the smallest leaseKey of the last scan
	beats        map[string]beatSeen  // beat attribute of another incarnation -> its beat as seen
	boardRead    time.Time            // when this worker's beat last read the board
	beatSeq      int64                // beats started (retakenAt)
	beatName     string               // this incarnation's beat attribute; "": start a new one
	beatOn       string               // the item this incarnation beats on (its board)
	myBeat       int64                // this incarnation's beat as its last beat wrote it; 0: none yet
	lastBeat     time.Time            // when the last successful beat was sent; zero: never (see Holds)
	acks         []string             // steal notices for this worker acted on, deleted by its next beat
	orphans      map[string][]string  // notices of workers without a beat, as the last beat saw them: deleted by the next one
	unsent       []stealNote          // steal notices whose write failed, tried again (retryNotices)
	ownerChanged map[string]time.Time // owner -> when its beat or a lease of it last changed
	watch        map[string]string    // other owner -> the lease read between scans
	needScan     bool                 // the next take cycle scans the table
	lastScan     time.Time            // of the last full scan
	children     map[string][]string  // shard -> its children, from the last SyncShards
	parents      map[string][]string  // shard -> its parents, from the last SyncShards (see Ancestors)
	listed       map[string]bool      // the shards of the last SyncShards
	known        map[string]string    // shard -> the last sequence number or SHARD_END seen or written as its checkpoint (SHARD_END also when its lease was deleted once finished, see SyncShards)
	pending      map[string]time.Time // hand-offs this worker asked for -> when
	given        map[string]int64     // shard -> leases of it given up on purpose (see Given)

	// Ancestors' walks (ancestors.go): held shard -> its ancestors, at
	// most ancestryMax (nil: a shard without parents); nil since the
	// shard tree last changed (treeChangedLocked).
	ancestry    map[string][]string
	ancestryMax int

	// Free leases between scans (free.go).
	unowned    map[string]unownedLease // takeable leases in the scans, since when (noteUnownedLocked)
	parentTurn int                     // the first of the awaited parents checkParents reads next
}

// heldLease is a lease this worker holds. lease and renewed are guarded by
// Coordinator.mu; sem serializes the writes of the lease (renew, checkpoint,
// release), whose condition needs the counter the previous one wrote.
type heldLease struct {
	sem     *semaphore.Weighted // of weight 1
	lease   Lease
	renewed time.Time // last successful write, on this worker's clock
	// unvouched: no beat may extend the lease until its own next
	// conditional write (a refused beat, a new incarnation, a gap).
	unvouched bool
	// handoff: another worker asked for the lease (HandOff); h.lease
	// names it the owner, this worker the checkpointOwner.
	handoff bool
	// unsure: the checkpoints of this worker's writes of the lease since
	// the last one known done (h.lease's) that failed without a definite
	// answer (every attempt timed out or was cut): any one of
	// them may have been applied. A renewal counts as the checkpoint it
	// leaves; each checkpoint counts once, and only the latest maxUnsure
	// are kept (unanswered). unsureSince is when the first of them was
	// sent. See whyRefused.
	unsure      []string
	unsureSince time.Time
	// retakenAt: the beat count when this worker took back a lease the
	// table still named it the owner of (0: not a retake). Other workers
	// judge it by its beat, to which such a take is no news, so the lease
	// is not trusted until a later beat of this worker succeeds.
	retakenAt int64
	// taken is the counter the take of this hold wrote: every lease of
	// the hold (its acquired event's, Held's) has at least this counter,
	// every lease of an earlier hold a lower one, since each write adds
	// one and is conditional on the counter before it (see HoldOfLease,
	// CommitterFor).
	taken int64
}

// seenLease is a lease as last scanned, and when its counter or owner last
// changed on this worker's clock.
type seenLease struct {
	lease   Lease
	changed time.Time
}

// leaseEvent is one queued event; exactly one of its fields is set.
type leaseEvent struct {
	acquired *Lease
	lost     string
	bad      *leasetable.BadItemError
	handoff  string
}

// NewCoordinator validates cfg and returns a Coordinator; it does no I/O
// (Run creates the table if needed).
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Coordinator{
		cfg:     cfg,
		table:   newTable(TableConfig{Name: cfg.TableName, Client: cfg.DynamoDB, Clock: cfg.Clock, AttemptTimeout: cfg.AttemptTimeout}, cfg.Logger.With("worker", cfg.WorkerID)),
		log:     cfg.Logger.With("worker", cfg.WorkerID),
		drained: make(chan struct{}),
		gone:    make(chan struct{}),
		held:    make(map[string]*heldLease),
		seen:    make(map[string]seenLease),
		wake:    make(chan struct{}, 1),
		bad:     make(map[string]string),
		dead:    make(map[string]bool),

		ownerChanged: make(map[string]time.Time),
		beats:        make(map[string]beatSeen),
		refused:      make(map[string]string),
		known:        make(map[string]string),
		pending:      make(map[string]time.Time),
		failing:      make(map[string]*failStreak),
	}, nil
}

// Table returns the lease table.
func (c *Coordinator) Table() *Table { return c.table }

// WorkerID returns this worker's ID.
func (c *Coordinator) WorkerID() string { return c.cfg.WorkerID }

// Held returns the leases this worker holds, as last written.
func (c *Coordinator) Held() []Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Lease, 0, len(c.held))
	for _, h := range c.held {
		out = append(out, h.lease)
	}
	return out
}

// Finished returns the shards finished for good, as far as this worker
// knows: those whose lease it last saw (in a scan) or wrote at
// checkpointer.ShardEnd, whichever worker marked it, the lease maybe
// deleted since (finishedLeases), and those a shard sync found without a
// lease but with a descendant whose lease has begun (deleted once
// finished, maybe before this worker saw it), while the shard is listed
// or a parent of one. The order is unspecified.
func (c *Coordinator) Finished() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for shard, ckpt := range c.known {
		if ckpt == checkpointer.ShardEnd {
			out = append(out, shard)
		}
	}
	return out
}

// Given returns, by shard, how many times this worker gave the shard's
// lease up on purpose: released at a drain, handed off to a worker that
// asked for it, or refused; not lost, nor released at the shard's end. A
// metrics sampler tells a lease handed back from a lost one by it.
func (c *Coordinator) Given() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.given)
}

// ForgetGiven drops the counts Given reports for shards: a receiver that
// forgets the shards it no longer reads forgets their counts too, so that
// they do not grow with every shard the worker ever held.
func (c *Coordinator) ForgetGiven(shards ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range shards {
		delete(c.given, s)
	}
}

// givenLocked counts a lease of shard given up on purpose; c.mu is held.
func (c *Coordinator) givenLocked(shard string) {
	if c.given == nil {
		c.given = make(map[string]int64)
	}
	c.given[shard]++
}

// Holds reports whether this worker holds shard's lease and renewed it (a
// take, a checkpoint, its own renewal or, by default, this worker's beat
// within LeaseDuration of the last renewal) less than
// LeaseDuration ago on its clock, and, once it has beaten, its last beat
// succeeded less than LeaseDuration ago. A reader checks it before delivering
// records: once it is false, another worker may already have taken the
// lease (a paused process learns of the loss only when its next write
// fails), so records read now would be read twice. HoldOf says why.
func (c *Coordinator) Holds(shard string) bool { return c.HoldOf(shard) == Held }

// Hold is what a worker may do with the records it reads of a shard, and
// why (Coordinator.HoldOf).
type Hold int

const (
	// Held: the lease is held and renewed (Holds); records are delivered.
	Held Hold = iota
	// Lapsed: the lease is not held, or went unrenewed for LeaseDuration
	// (or this worker's beat did): another worker may own it by now.
	Lapsed
	// HandingOff: renewed, but another worker asked for it (OnHandoff);
	// it is being handed off.
	HandingOff
	// Unvouched: renewed, but taken while the table already named this
	// worker its owner (taken back after a pause, or handed off to this
	// worker, which asked for it); trusted once a beat sent after the
	// take succeeds, within RenewInterval.
	Unvouched
	// Renewing: renewed, but this worker's beats vouch for it no longer
	// (a new incarnation of its beat, after a refused beat or at start):
	// trusted once its own renewal, sent then, succeeds. A new
	// incarnation's first beat proves nothing of the leases others may
	// have taken while this worker's beats failed, however recent a
	// checkpoint written meanwhile.
	Renewing
)

// HoldOf reports whether this worker holds shard's lease (see Holds) and,
// if not, why.
func (c *Coordinator) HoldOf(shard string) Hold {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[shard]
	// Once this worker has beaten, the others judge all its leases by its
	// beat alone: none is trusted past LeaseDuration after the last beat
	// that succeeded, whatever wrote the lease since (a take after it held
	// nothing for a while, a checkpoint while beats fail).
	beatOK := c.lastBeat.IsZero() || now.Sub(c.lastBeat) < c.cfg.LeaseDuration
	switch {
	case !ok || !beatOK || now.Sub(h.renewed) >= c.cfg.LeaseDuration:
		return Lapsed
	case h.handoff:
		return HandingOff
	case h.unvouched:
		return Renewing
	case h.retakenAt != 0:
		return Unvouched
	}
	return Held
}

// HoldOfLease is HoldOf for the hold of l, a lease of this worker's (as
// OnAcquired or Held gave it): Lapsed if the shard's lease was lost since
// and this worker took it again (a later hold, whose acquired event its
// assigner may not have handled yet). A reader started for l must not deliver for a later hold: the
// records it read may be another worker's by now, read from before that
// worker's checkpoint.
func (c *Coordinator) HoldOfLease(l Lease) Hold {
	c.mu.Lock()
	h, ok := c.held[l.Shard]
	later := ok && l.Counter < h.taken
	c.mu.Unlock()
	if later {
		return Lapsed
	}
	return c.HoldOf(l.Shard)
}

// CommitterFor returns a checkpointer.Committer that commits on the hold
// of l, a lease of this worker's (as OnAcquired or Held gave it), as Commit
// does, and on no later hold
// of the shard: if the lease was lost and this worker took it again, its
// commits return an error wrapping checkpointer.ErrLeaseLost (and report no
// loss: the later hold is not lost). A checkpointer registered for one hold
// keeps that hold's progress until its assigner removes it, which the
// later hold's checkpoint, written meanwhile by another worker, may be
// past: committed on the later hold, it would set the checkpoint back.
func (c *Coordinator) CommitterFor(l Lease) checkpointer.Committer {
	return checkpointer.CommitterFunc(func(ctx context.Context, shard, seq string) error {
		if shard != l.Shard {
			return fmt.Errorf("leasetable: commit shard %s with the committer of shard %s", shard, l.Shard)
		}
		return c.commit(ctx, shard, seq, l.Counter)
	})
}

// Run makes sure the table exists, syncs shards (with ListShards), takes
// leases at once, then renews, takes and syncs on their periods and
// delivers lease events, until ctx is done (it returns ctx.Err(); held leases
// are left to expire, or are kept by a restart with the same WorkerID),
// Drain is called (it returns nil), or a periodic call finds the table
// deleted (it returns an error naming the table and the fix: no lease can
// be renewed, taken or checkpointed again). Calling Run more than once is
// an error.
func (c *Coordinator) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("leasetable: Coordinator.Run called more than once")
	}
	c.running = true
	c.mu.Unlock()
	if err := c.table.Ensure(ctx); err != nil {
		return err
	}
	if st := c.openState(ctx); st != nil {
		defer st.close()
	}
	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var g errgroup.Group
	g.Go(func() error { c.dispatch(loopCtx); return nil })
	g.Go(func() error { c.every(loopCtx, c.cfg.RenewInterval, c.renewCycle); return nil })
	g.Go(func() error {
		if c.cfg.ListShards != nil {
			c.every(loopCtx, c.cfg.ShardSyncInterval, c.syncListed)
		}
		return nil
	})
	g.Go(func() error {
		if c.cfg.ListShards != nil { // leases first, so the first take finds them
			c.syncListed(loopCtx)
		}
		c.takeCycle(loopCtx)
		c.every(loopCtx, c.cfg.TakeInterval, c.takeCycle)
		return nil
	})
	select {
	case <-ctx.Done():
	case <-c.drained:
	case <-c.gone:
	}
	stop()
	_ = g.Wait() // the goroutines return nil
	c.deliver()  // what was queued before the stop
	select {
	case <-c.gone:
		return c.goneErr
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// every calls f every d until ctx is done.
func (c *Coordinator) every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := c.cfg.Clock.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			f(ctx)
		}
	}
}

// dispatch delivers queued lease events until ctx is done.
func (c *Coordinator) dispatch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
			c.deliver()
		}
	}
}

// deliver calls the callbacks of the queued events, in order, without a lock.
func (c *Coordinator) deliver() {
	for {
		c.mu.Lock()
		evs := c.events
		c.events = nil
		c.mu.Unlock()
		if len(evs) == 0 {
			return
		}
		for _, ev := range evs {
			switch {
			case ev.acquired != nil && c.cfg.OnAcquired != nil:
				c.cfg.OnAcquired(*ev.acquired)
			case ev.lost != "" && c.cfg.OnLost != nil:
				c.cfg.OnLost(ev.lost)
			case ev.bad != nil && c.cfg.OnBadItem != nil:
				c.cfg.OnBadItem(ev.bad)
			case ev.handoff != "" && c.cfg.OnHandoff != nil:
				c.cfg.OnHandoff(ev.handoff)
			}
		}
	}
}

// queueLocked queues an event for dispatch; c.mu must be held.
func (c *Coordinator) queueLocked(ev leaseEvent) {
	c.events = append(c.events, ev)
	select {
	case c.wake <- struct{}{}:
	default: // already signalled
	}
}

// current returns the lease of h if h is still the held lease of shard.
func (c *Coordinator) current(shard string, h *heldLease) (Lease, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[shard] != h {
		return Lease{}, false
	}
	return h.lease, true
}

// lose drops h if it is still shard's held lease and reports the loss.
func (c *Coordinator) lose(shard string, h *heldLease, why error) {
	c.mu.Lock()
	if c.held[shard] != h {
		c.mu.Unlock()
		return
	}
	delete(c.held, shard)
	c.queueLocked(leaseEvent{lost: shard})
	// The next take cycle scans: a lease lost only on this worker's clock
	// (a pause, failed writes) is still this worker's in the table, and
	// no other worker may be watching it.
	c.needScan = true
	c.mu.Unlock()
	c.log.Info("leasetable: lease lost", "shard", shard, "err", why)
}

// renewCycle runs one renewal period: every held lease is renewed with
// RenewEveryLease, else one (see beat).
func (c *Coordinator) renewCycle(ctx context.Context) {
	if c.cfg.RenewEveryLease {
		c.renewEach(ctx)
		return
	}
	c.beat(ctx)
}

// renewEach renews every held lease once.
func (c *Coordinator) renewEach(ctx context.Context) {
	c.mu.Lock()
	hs := maps.Clone(c.held)
	c.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(renewParallelism)
	for shard, h := range hs {
		g.Go(func() error { c.renew(ctx, shard, h); return nil })
	}
	_ = g.Wait() // the goroutines return nil
}

func (c *Coordinator) renew(ctx context.Context, shard string, h *heldLease) {
	if h.sem.Acquire(ctx, 1) != nil {
		return
	}
	defer h.sem.Release(1)
	l, ok := c.current(shard, h)
	if !ok || c.handingOff(h) {
		return
	}
	write := func(l Lease) (Lease, error) {
		wctx, cancel := c.untilExpiry(ctx, h)
		defer cancel()
		nl, err := c.table.Renew(wctx, l)
		return nl, c.expiredError(wctx, err)
	}
	started := c.cfg.Clock.Now()
	nl, err := write(l)
judge:
	for range maxJudged {
		if err == nil {
			break
		}
		switch now, r := c.whyRefused(ctx, shard, h, err, c.landedAs(h, l, l.Checkpoint)); r {
		case refusedLanded:
			nl, err = now, nil // renewed, its answer lost
			if _, ok := c.adoptUnsure(h, now); ok {
				// Perhaps by an earlier renewal: renewed again now.
				l, started = now, c.cfg.Clock.Now()
				nl, err = write(l)
			}
		case refusedGivenBack:
			// Asked for and given back since this worker last wrote it:
			// renewed on the lease as it is now.
			c.log.Info("leasetable: a lease asked for was given back; renewing it as it is now", "shard", shard, "counter", now.Counter)
			l, started = now, c.cfg.Clock.Now()
			nl, err = write(l)
		case refusedAsked:
			return // handed off, not lost
		default:
			break judge
		}
	}
	if err != nil && !errors.Is(err, checkpointer.ErrLeaseLost) {
		c.unanswered(h, l.Checkpoint, started)
	}
	switch {
	case err == nil:
		c.callSucceeded(callRenew, shard)
		c.wroteAt(h, nl, started)
	case errors.Is(err, checkpointer.ErrLeaseLost):
		c.callSucceeded(callRenew, shard) // DynamoDB answered
		c.lose(shard, h, err)
	case ctx.Err() != nil:
	default:
		c.mu.Lock()
		stale := c.cfg.Clock.Now().Sub(h.renewed) >= c.cfg.LeaseDuration
		c.mu.Unlock()
		if stale {
			// This worker's own failure, not another worker's take (INFO):
			// it stops reading the shard because DynamoDB fails it.
			c.log.Warn("leasetable: lease renewal failed for a lease duration; the lease is lost, other workers may take it",
				append([]any{"shard", shard}, c.lossFix(ctx, callRenew, shard, err)...)...)
			c.countFailure(callRenew, shard, err) // warned just now
			c.lose(shard, h, fmt.Errorf("not renewed for %v, other workers may take it: %w", c.cfg.LeaseDuration, err))
			return
		}
		c.callFailed(ctx, callRenew, shard, "leasetable: lease renewal failed; retrying next period: the lease is lost if it fails for a lease duration", err, "shard", shard)
	}
}

// maxJudged bounds the rounds of a renewal or checkpoint refused, judged
// by the lease read back (whyRefused) and sent again on it: a write sent
// again is refused in turn when the lease moved meanwhile (asked for, then
// given back before the write sent again on the lease asked for landed),
// and judged again. Refused every time, other workers are writing the
// lease: it is lost.
const maxJudged = 3

// Commit writes seq (a sequence number, or checkpointer.ShardEnd) as the checkpoint of
// shard, conditional on this worker still holding the lease with the counter
// it last wrote; it makes the Coordinator a checkpointer.Committer for a Checkpointer.
// If the lease is lost it returns an error wrapping checkpointer.ErrLeaseLost, writes
// nothing, and reports the loss (OnLost); a write refused only because an
// earlier attempt of it was applied, its answer lost, is told apart by the
// lease read back and counts as written, and one refused because another
// worker asked for the lease and gave it back before this worker learned of
// it is sent again on the lease given back (whyRefused); a write sent again
// and refused in turn is judged again (maxJudged). After checkpointer.ShardEnd is written the lease
// is released: no worker takes a finished shard's lease, and its children may
// start.
func (c *Coordinator) Commit(ctx context.Context, shard, seq string) error {
	return c.commit(ctx, shard, seq, anyHold)
}

// anyHold is commit's taken for the shard's current hold, whichever it is.
const anyHold = -1

// commit is Commit on the hold a lease with counter counter is of
// (anyHold: the current one, whichever it is).
func (c *Coordinator) commit(ctx context.Context, shard, seq string, counter int64) error {
	c.mu.Lock()
	h := c.held[shard]
	c.mu.Unlock()
	if h == nil {
		return fmt.Errorf("leasetable: commit shard %s: not held by %s: %w", shard, c.cfg.WorkerID, checkpointer.ErrLeaseLost)
	}
	if counter != anyHold && counter < h.taken {
		return fmt.Errorf("leasetable: commit shard %s: the hold of its lease at counter %d was lost; %s took the lease again at counter %d: %w",
			shard, counter, c.cfg.WorkerID, h.taken, checkpointer.ErrLeaseLost)
	}
	if err := h.sem.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("leasetable: commit shard %s: %w", shard, err)
	}
	defer h.sem.Release(1)
	l, ok := c.current(shard, h)
	if !ok {
		return fmt.Errorf("leasetable: commit shard %s: not held by %s: %w", shard, c.cfg.WorkerID, checkpointer.ErrLeaseLost)
	}
	started := c.cfg.Clock.Now()
	nl, err := c.commitOnce(ctx, h, l, seq)
judge:
	for range maxJudged {
		if err == nil {
			break
		}
		switch now, r := c.whyRefused(ctx, shard, h, err, c.landedAs(h, l, seq)); r {
		case refusedLanded:
			c.log.Info("leasetable: a checkpoint was written, its answer lost; the lease is kept", "shard", shard, "seq", seq, "checkpoint", now.Checkpoint)
			nl, err = now, nil
			if since, ok := c.adoptUnsure(h, now); ok {
				// Perhaps an earlier write left it, when the first of them
				// was sent. If it holds an earlier checkpoint, this one is
				// written on the lease it left; if this one, it is not
				// written again (never the same number twice).
				started = since
				if now.Checkpoint != seq {
					l, started = now, c.cfg.Clock.Now()
					nl, err = c.commitOnce(ctx, h, l, seq)
				}
			}
		case refusedGivenBack:
			c.log.Info("leasetable: a lease asked for was given back; the checkpoint is written on it as it is now", "shard", shard, "seq", seq, "checkpoint", now.Checkpoint)
			if now.Checkpoint == seq {
				// Written, its answer lost, before the request (or the
				// checkpoint already there): not written again (never the
				// same number twice). Renewed when a write of it was
				// sent, if one moved the checkpoint; else not renewed.
				nl, err = now, nil
				if since, ok := c.adoptUnsure(h, now); ok {
					started = since
				} else if seq == l.Checkpoint {
					c.mu.Lock()
					started = h.renewed
					c.mu.Unlock()
				}
				break
			}
			l, started = now, c.cfg.Clock.Now()
			nl, err = c.commitOnce(ctx, h, l, seq)
		case refusedAsked:
			// Asked for since this worker last wrote it: the last checkpoint
			// before the hand-off is written on the lease as it is now.
			if l, ok = c.current(shard, h); !ok {
				return fmt.Errorf("leasetable: commit shard %s: handed off: %w", shard, checkpointer.ErrLeaseLost)
			}
			nl, err = c.commitOnce(ctx, h, l, seq)
		default:
			break judge
		}
	}
	switch {
	case errors.Is(err, checkpointer.ErrLeaseLost):
		c.lose(shard, h, err)
		return err
	case err != nil:
		c.unanswered(h, seq, started)
		return err
	}
	c.wroteAt(h, nl, started)
	switch {
	case seq == checkpointer.ShardEnd:
		c.finish(ctx, shard, h, nl)
		c.mu.Lock()
		c.needScan = true // its children may be taken now
		c.mu.Unlock()
	case len(l.Parents) > 0 && !isSeq(l.Checkpoint):
		c.mu.Lock()
		c.needScan = true // a child's first checkpoint: its parents' leases may be deleted (finishedLeases)
		c.mu.Unlock()
	}
	return nil
}

// commitOnce writes seq as l's checkpoint, abandoned when h expires.
func (c *Coordinator) commitOnce(ctx context.Context, h *heldLease, l Lease, seq string) (Lease, error) {
	wctx, cancel := c.untilExpiry(ctx, h)
	defer cancel()
	var nl Lease
	var err error
	if seq == checkpointer.ShardEnd {
		nl, err = c.table.checkpointEnd(wctx, l, c.childrenOf(l.Shard))
	} else {
		nl, err = c.table.Checkpoint(wctx, l, seq, 0)
	}
	return nl, c.expiredError(wctx, err)
}

// finish stops holding a lease at checkpointer.ShardEnd and releases it (best effort: no
// worker takes a finished lease either way). A release refused is no
// failure: the lease changed since, most likely released by this very
// write, its answer lost (the SDK's retry failed the condition it had moved
// on), or deleted (a KCL's clean-up).
func (c *Coordinator) finish(ctx context.Context, shard string, h *heldLease, l Lease) {
	c.mu.Lock()
	if c.held[shard] == h {
		delete(c.held, shard)
	}
	c.mu.Unlock()
	switch _, err := c.table.Release(ctx, l); {
	case errors.Is(err, checkpointer.ErrLeaseLost):
		c.log.Debug("leasetable: a finished shard's lease changed before its release: released already, or deleted", "shard", shard, "err", err)
	case err != nil:
		c.log.Warn("leasetable: releasing a finished shard's lease failed", "shard", shard, "err", err)
	}
	c.log.Info("leasetable: shard finished", "shard", shard)
}

// StopTaking stops the take cycles from taking leases or asking for them,
// for a worker about to drain (its readers stopped, its last records
// completing) and gives up at once the hand-offs it asked for (see
// dropPending): a lease taken now would only be released at its Drain,
// while no worker reads the shard. The leases held are still renewed,
// checkpointed and, when asked for, handed off. It returns the errors of
// the hand-offs given up. Drain stops the take cycles too; StopTaking is
// idempotent.
func (c *Coordinator) StopTaking(ctx context.Context) error {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
	return c.dropPending(ctx)
}

// Drain hands every held lease back, for a clean shutdown after the caller's
// final checkpoints: (1) take cycles stop taking leases (StopTaking); (2) each held lease
// is released (owner cleared) once a write in flight for it is done, so any
// worker may take it at once, without waiting for it to expire, and so is
// every lease the table names this worker's that it does not hold (see
// freeUnheld), and this worker's beat is removed from the board, which
// tells the other workers to look; (3) Run returns nil. No OnLost is reported for drained leases. It
// returns the release errors joined (a lease not released expires after
// LeaseDuration). Drain is idempotent.
func (c *Coordinator) Drain(ctx context.Context) error {
	c.mu.Lock()
	first := !c.drainCalled
	c.drainCalled, c.draining = true, true
	hs := maps.Clone(c.held)
	c.mu.Unlock()
	var errs []error
	for shard, h := range hs {
		if err := c.drainOne(ctx, shard, h); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.dropPending(ctx), c.freeUnheld(ctx))
	if first {
		c.unbeat(ctx)
		close(c.drained)
	}
	return errors.Join(errs...)
}

// freeUnheld frees, for Drain, the leases the table names this worker's
// owner that it does not hold: one given back to it by a worker that asked
// for it and drained (dropPending) after this worker let it go (its
// hand-off refused, or lost at a renewal), whose take cycle would have
// taken it back had it not stopped taking; or one taken by a write whose
// answer was lost. Left as they are, they stay with a worker that is gone
// until they expire, their shards read by no one meanwhile. A lease this
// worker asked for is given up as dropPending does. It scans the table
// once, after the held leases were released.
func (c *Coordinator) freeUnheld(ctx context.Context) error {
	sc, err := c.table.scan(ctx)
	if err != nil {
		return fmt.Errorf("leasetable: drain: looking for leases named this worker's that it does not hold: %w", err)
	}
	var errs []error
	for _, l := range sc.leases {
		c.mu.Lock()
		_, held := c.held[l.Shard]
		c.mu.Unlock()
		if l.Owner != c.cfg.WorkerID || held {
			continue
		}
		if l.CheckpointOwner != "" {
			errs = append(errs, c.giveUp(ctx, l.Shard))
			continue
		}
		c.log.Info("leasetable: releasing a lease named this worker's that it does not hold", "shard", l.Shard)
		if _, err := c.table.Release(ctx, l); err != nil && !errors.Is(err, checkpointer.ErrLeaseLost) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropPending gives up the hand-offs this worker asked for and has not
// taken yet (see checkHandoffs): each such lease names this worker its
// owner, so left as it is it would stay with a worker that is gone until
// it expires. A lease its holder has not handed off yet is given back to
// the holder (owner again, no checkpointOwner), which may still be reading
// it and trusting it: freeing it would let a third worker take it while
// the holder reads on. The holder's next write of it is refused (the
// counter moved) and sent again on the lease given back (whyRefused,
// refusedGivenBack): one that had not learned of the request reads on;
// one handing it off writes its last checkpoint, hands the lease off to
// no one (HandOff), and takes it back at its next take cycle, reading
// after that checkpoint. A lease already handed off is
// freed, for any worker to take from that checkpoint.
func (c *Coordinator) dropPending(ctx context.Context) error {
	c.mu.Lock()
	pending := slices.Collect(maps.Keys(c.pending))
	clear(c.pending)
	c.mu.Unlock()
	var errs []error
	for _, shard := range pending {
		errs = append(errs, c.giveUp(ctx, shard))
	}
	return errors.Join(errs...)
}

// giveUp gives up the hand-off of shard this worker asked for, if the
// lease still names it owner (see dropPending).
func (c *Coordinator) giveUp(ctx context.Context, shard string) error {
	// A refused write means the lease changed since it was read, most
	// likely handed off to this worker by its holder meanwhile: read again
	// and free it, or it stays with this worker, gone, until it expires.
	// Refused every time, other workers are writing it: left to them.
	const tries = 3
	for range tries {
		l, ok, err := c.table.Get(ctx, shard)
		if err != nil || !ok || l.Owner != c.cfg.WorkerID {
			return err
		}
		if _, err := c.table.dropAsked(ctx, l); !errors.Is(err, checkpointer.ErrLeaseLost) {
			return err
		}
	}
	return nil
}

func (c *Coordinator) drainOne(ctx context.Context, shard string, h *heldLease) error {
	if err := h.sem.Acquire(ctx, 1); err != nil {
		return fmt.Errorf("leasetable: drain shard %s: %w", shard, err)
	}
	defer h.sem.Release(1)
	l, ok := c.current(shard, h)
	if !ok {
		return nil // lost or finished meanwhile
	}
	c.mu.Lock()
	delete(c.held, shard)
	c.givenLocked(shard)
	handoff := h.handoff
	c.mu.Unlock()
	release := c.table.Release
	if handoff { // to the worker that asked for it
		release = c.table.handOff
	}
	_, err := release(ctx, l)
	if errors.Is(err, checkpointer.ErrLeaseLost) {
		// The counter moved: another worker asked for the lease, or asked
		// and gave it back (it drained: dropPending). Released or handed
		// off as it is now, or it stays with this worker, gone, until it
		// expires.
		now, ok, gerr := c.table.Get(ctx, shard)
		switch {
		case gerr != nil:
			return gerr
		case ok && now.Owner == c.cfg.WorkerID && now.CheckpointOwner == "":
			_, err = c.table.Release(ctx, now)
		case ok && now.Owner != c.cfg.WorkerID && now.CheckpointOwner == c.cfg.WorkerID:
			_, err = c.table.handOff(ctx, now)
		}
	}
	if err != nil && !errors.Is(err, checkpointer.ErrLeaseLost) {
		return err
	}
	return nil
}
