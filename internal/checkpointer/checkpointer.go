package checkpointer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/streak"
)

// Special checkpoint values, spelled as the Kinesis Client Library writes them
// in the lease table's checkpoint attribute.
const (
	// TrimHorizon means "start at the oldest record still in the shard".
	TrimHorizon = "TRIM_HORIZON"
	// LatestPosition means "start after the newest record at the time of the
	// first read".
	LatestPosition = "LATEST"
	// AtTimestamp means "start at a timestamp kept elsewhere" (KCL only).
	AtTimestamp = "AT_TIMESTAMP"
	// ShardEnd means the shard is closed and every record in it was
	// processed; its child shards may start.
	ShardEnd = "SHARD_END"
)

// Default values of Config fields left at zero.
const (
	DefaultCommitAttempts = 4
	DefaultCommitBackoff  = 100 * time.Millisecond
	DefaultParallelism    = 16
)

// maxCommitBackoff caps the wait between two attempts of one commit: the
// attempts of a round must end well within a checkpoint interval.
const maxCommitBackoff = 2 * time.Second

// Committer writes a checkpoint for one shard: seq is a sequence number
// (decimal string) or ShardEnd. It is called from the Checkpointer's
// goroutines, never while the Checkpointer holds a lock, and never twice at
// once for the same shard. An error wrapping ErrLeaseLost is not retried.
type Committer interface {
	Commit(ctx context.Context, shard, seq string) error
}

// CommitterFunc adapts a function to the Committer interface.
type CommitterFunc func(ctx context.Context, shard, seq string) error

// Commit calls f(ctx, shard, seq).
func (f CommitterFunc) Commit(ctx context.Context, shard, seq string) error {
	return f(ctx, shard, seq)
}

// Config configures a Checkpointer. The zero value of each optional field
// means its documented default.
type Config struct {
	// Interval is how often every registered shard is checkpointed. Required,
	// > 0; a receiver usually passes its batch interval.
	Interval time.Duration
	// Latest returns the greatest sequence number of shard that is safe to
	// checkpoint, and false when there is none yet: for weir's Kinesis
	// receiver, the latest record of a completed batch (DESIGN.md,
	// guarantee G4). Required.
	// It is called from the Checkpointer's goroutines, never under its lock,
	// and must be safe for concurrent use.
	Latest func(shard string) (seq string, ok bool)
	// CommitAttempts is how many times one commit is tried before it counts
	// as failed. Default DefaultCommitAttempts (4).
	CommitAttempts int
	// CommitBackoff is the wait before the first retry; it doubles for each
	// further retry and is jittered to between half and all of its value.
	// Default DefaultCommitBackoff (100ms).
	CommitBackoff time.Duration
	// Parallelism bounds the commits one interval runs at once, over all
	// shards. Default DefaultParallelism (16).
	Parallelism int
	// Clock is the time source of the interval timer and back-off.
	// Default clock.Real{}.
	Clock clock.Clock
	// Logger receives failure and recovery logs. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) validate() error {
	var problems []error
	if c.Interval <= 0 {
		problems = append(problems, fmt.Errorf("Interval %v: must be > 0 (use the batch interval)", c.Interval))
	}
	if c.Latest == nil {
		problems = append(problems, errors.New("Latest is nil: set it to the receiver's lookup of the latest safe (completed) sequence number"))
	}
	if c.CommitAttempts < 0 {
		problems = append(problems, fmt.Errorf("CommitAttempts %d: must be >= 0 (0 means %d)", c.CommitAttempts, DefaultCommitAttempts))
	}
	if c.CommitBackoff < 0 {
		problems = append(problems, fmt.Errorf("CommitBackoff %v: must be >= 0 (0 means %v)", c.CommitBackoff, DefaultCommitBackoff))
	}
	if c.Parallelism < 0 {
		problems = append(problems, fmt.Errorf("Parallelism %d: must be >= 0 (0 means %d)", c.Parallelism, DefaultParallelism))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// Checkpointer commits, every Config.Interval, the latest safe sequence
// number (Config.Latest) of every registered shard when it is greater than the last one
// committed. It fires whether or not new records arrived, never writes the
// same number twice, retries a commit with jittered back-off and counts and
// logs (once per failure streak per shard) a commit that still fails: a failed
// checkpoint is not fatal, it only means more records are read again after a
// restart.
//
// A Checkpointer is safe for concurrent use. Run drives the timer; Close makes
// a last checkpoint of every registered shard and stops Run.
type Checkpointer struct {
	interval time.Duration
	latest   func(string) (string, bool)
	attempts int
	backoff  time.Duration
	parallel int
	clk      clock.Clock
	log      *slog.Logger

	stop      chan struct{} // closed by the first Close
	closeDone chan struct{} // closed when the first Close returns

	mu     sync.Mutex
	shards map[string]*shardState
	gone   checkpoint.Stats // the counters of the shards forgotten (Forget), Shards nil
	// failing holds the shards in a failure streak, grouped by kind of
	// failure (its error code): a streak of a kind is logged at WARN when
	// it starts on one shard and at INFO when it ends on all, so that an
	// outage of DynamoDB on many shards is one line, not one per shard
	// (the others are logged at DEBUG), and one shard failing for a
	// reason of its own does not hide an outage of the others.
	failing  streak.Kinds
	closed   bool
	runDone  chan struct{} // closed when Run returns; nil before Run
	closeErr error
}

// shardState is one shard's checkpoint state. The fields other than sem are
// guarded by Checkpointer.mu.
type shardState struct {
	// sem holds one token while a commit for the shard is in flight, so a
	// removal waits for it and commits are never concurrent per shard.
	sem
	committer Committer // nil when the shard is not registered
	last      string    // last committed (or registered) checkpoint
	stats     checkpoint.ShardStats
}

// New returns a Checkpointer, or an error wrapping ErrInvalidConfig that names
// every bad field.
func New(cfg Config) (*Checkpointer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cp := &Checkpointer{
		interval:  cfg.Interval,
		latest:    cfg.Latest,
		attempts:  cmp.Or(cfg.CommitAttempts, DefaultCommitAttempts),
		backoff:   cmp.Or(cfg.CommitBackoff, DefaultCommitBackoff),
		parallel:  cmp.Or(cfg.Parallelism, DefaultParallelism),
		clk:       clock.Or(cfg.Clock),
		log:       cfg.Logger,
		stop:      make(chan struct{}),
		closeDone: make(chan struct{}),
		shards:    make(map[string]*shardState),
	}
	if cp.log == nil {
		cp.log = slog.Default()
	}
	return cp, nil
}

// stateLocked returns shard's state, creating it; c.mu must be held.
func (cp *Checkpointer) stateLocked(shard string) *shardState {
	st, ok := cp.shards[shard]
	if !ok {
		st = &shardState{sem: make(sem, 1)}
		cp.shards[shard] = st
	}
	return st
}

// Register starts checkpointing shard through c on every interval, or
// replaces the Committer of a shard already registered. committed is the
// checkpoint already stored for the shard (the lease's checkpoint when it was
// acquired): a sequence number there is never written again nor gone below;
// "", TrimHorizon or LatestPosition mean none; ShardEnd means the shard is
// finished and nothing more is written for it. A shard registered again
// after Remove or MarkShardEnd (its lease taken again) starts from committed
// alone, even below what was committed before: the lease's checkpoint may
// have been set back since (an operator's fix of a refused checkpoint), and
// a floor kept from the earlier hold would skip every commit until the
// shard's numbers passed it. Register returns ErrClosed after Close.
func (cp *Checkpointer) Register(shard string, c Committer, committed string) error {
	if shard == "" {
		return errors.New("checkpoint: Register: empty shard id")
	}
	if c == nil {
		return fmt.Errorf("checkpoint: Register %s: nil Committer", shard)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.closed {
		return fmt.Errorf("checkpoint: Register %s: %w", shard, ErrClosed)
	}
	st := cp.stateLocked(shard)
	if st.committer == nil {
		st.last = "" // a new hold: the lease's checkpoint is the one stored
	}
	st.committer = c
	st.stats.Registered = true
	st.raiseLocked(committed)
	return nil
}

// raiseLocked moves last up to v when v is ShardEnd or a greater sequence
// number.
func (st *shardState) raiseLocked(v string) {
	switch {
	case st.last == ShardEnd:
	case v == ShardEnd:
		st.last = ShardEnd
	case isSeq(v):
		st.last = batch.MaxSeq(st.last, v)
	}
	st.stats.Committed = st.last
}

// isSeq reports whether s is a Kinesis sequence number, as batch.ValidateSeq
// defines one: decimal digits without a leading zero, at most
// batch.MaxSeqDigits of them (the API's pattern; real ones have 56).
func isSeq(s string) bool { return batch.ValidateSeq(s) == nil }

// sem is a one-token semaphore: make(sem, 1).
type sem chan struct{}

// acquire waits until the token is free and takes it, or ctx is done.
func (s sem) acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release hands the token back.
func (s sem) release() { <-s }

// Remove stops checkpointing shard. It first waits for a commit in flight for
// the shard to finish. Then, when final is not nil (the shard ended, or the
// lease is handed back cleanly), it commits the latest safe sequence number
// through final if it is newer than the last one committed, and returns that
// commit's error; when final is nil (the lease was lost: another worker may
// already be processing the shard) it commits nothing. Removing a shard that
// is not registered is allowed.
func (cp *Checkpointer) Remove(ctx context.Context, shard string, final Committer) error {
	cp.mu.Lock()
	st := cp.stateLocked(shard)
	cp.mu.Unlock()
	if err := st.acquire(ctx); err != nil {
		return fmt.Errorf("checkpoint: Remove %s: %w", shard, err)
	}
	defer st.release()
	cp.mu.Lock()
	st.committer = nil
	st.stats.Registered = false
	if final == nil {
		cp.failing.Ended(shard) // it commits no more
	}
	cp.mu.Unlock()
	if final == nil {
		cp.log.Debug("checkpoint: shard removed without a final checkpoint", "shard", shard)
		return nil
	}
	err := cp.commitLatest(ctx, shard, st, final)
	if err != nil {
		// It commits no more: its failure, returned, ends its streak, so
		// that the other shards' end of an outage is logged, and the next
		// outage warned about.
		cp.mu.Lock()
		cp.failing.Ended(shard)
		cp.mu.Unlock()
	}
	return err
}

// MarkShardEnd records that shard is finished: it stops checkpointing the
// shard (waiting for a commit in flight, like Remove) and commits ShardEnd
// through c, once; a later call for the same shard writes nothing. The caller
// calls it after every block read from the shard is completed, so that the
// shard's children may start. It returns the commit's error (after retries),
// which wraps ErrLeaseLost if the lease was lost.
func (cp *Checkpointer) MarkShardEnd(ctx context.Context, shard string, c Committer) error {
	if c == nil {
		return fmt.Errorf("checkpoint: MarkShardEnd %s: nil Committer", shard)
	}
	cp.mu.Lock()
	st := cp.stateLocked(shard)
	cp.mu.Unlock()
	if err := st.acquire(ctx); err != nil {
		return fmt.Errorf("checkpoint: MarkShardEnd %s: %w", shard, err)
	}
	defer st.release()
	cp.mu.Lock()
	st.committer = nil
	st.stats.Registered = false
	ended := st.last == ShardEnd
	cp.mu.Unlock()
	if ended {
		return nil
	}
	return cp.commit(ctx, shard, st, c, ShardEnd)
}

// commitLatest commits the latest safe sequence number of shard through c
// if it is newer than the last one committed. The caller holds st's token.
func (cp *Checkpointer) commitLatest(ctx context.Context, shard string, st *shardState, c Committer) error {
	seq, ok := cp.latest(shard)
	if ok {
		if !isSeq(seq) {
			err := fmt.Errorf("checkpoint: shard %s: latest %q is not a sequence number", shard, seq)
			cp.recordFailure(shard, st, err)
			return err
		}
	}
	cp.mu.Lock()
	newer := ok && st.last != ShardEnd && (st.last == "" || batch.CompareSeq(seq, st.last) > 0)
	if !newer {
		st.stats.Skips++
	}
	cp.mu.Unlock()
	if !newer {
		return nil
	}
	return cp.commit(ctx, shard, st, c, seq)
}

// commit writes seq through c with retries and records the outcome. The
// caller holds st's token.
func (cp *Checkpointer) commit(ctx context.Context, shard string, st *shardState, c Committer, seq string) error {
	err := cp.retry(ctx, shard, st, func(ctx context.Context) error { return c.Commit(ctx, shard, seq) })
	if err != nil {
		err = fmt.Errorf("checkpoint: shard %s: commit %s: %w", shard, seq, err)
		if ctx.Err() == nil { // abandoned by a stop-now is no failure to count or log
			cp.recordFailure(shard, st, err)
		}
		return err
	}
	cp.mu.Lock()
	st.raiseLocked(seq)
	st.stats.Commits++
	over, recovered := cp.failing.Ended(shard)
	now := cp.clk.Now()
	cp.mu.Unlock()
	for kind, since := range over {
		cp.log.Info("checkpoint: commits succeed again", "shard", shard, "seq", seq, "kind", kind, "failing_for", now.Sub(since).Round(time.Millisecond))
	}
	if recovered && len(over) == 0 {
		cp.log.Debug("checkpoint: commits succeed again on this shard, not yet on others", "shard", shard, "seq", seq)
	}
	return nil
}

// recordFailure counts a failed commit and logs it: at WARN when it starts
// a streak of its kind (streak.Kind: no other shard fails so), at DEBUG
// otherwise. A commit refused because the lease was lost is logged at
// INFO and starts none: another worker took the shard (a fleet balancing),
// which the lease coordinator reports, and this worker commits it no more.
func (cp *Checkpointer) recordFailure(shard string, st *shardState, err error) {
	lost := errors.Is(err, ErrLeaseLost)
	cp.mu.Lock()
	st.stats.Failures++
	var (
		kind    string
		first   bool
		failing int
	)
	if !lost {
		kind, first, failing = cp.failing.Failed(shard, err, cp.clk.Now())
	}
	cp.mu.Unlock()
	const failed = "checkpoint: commit failed; records after the last checkpoint may be read again after a restart"
	switch {
	case lost:
		cp.log.Info("checkpoint: commit refused: another worker holds the shard's lease now, and reads it from its last checkpoint", "shard", shard, "err", err)
	case first:
		cp.log.Warn(failed+" (other shards whose commits fail so, of this kind, before they all commit again are logged at DEBUG; a failure of another kind is warned about)",
			"shard", shard, "kind", kind, "err", err)
	default:
		cp.log.Debug(failed, "shard", shard, "kind", kind, "shards_failing", failing, "err", err)
	}
}

// retry calls f until it succeeds, fails CommitAttempts times, fails with
// ErrLeaseLost, or ctx is done. It returns f's last error.
func (cp *Checkpointer) retry(ctx context.Context, shard string, st *shardState, f func(context.Context) error) error {
	wait := backoff.Policy{Base: cp.backoff, Max: maxCommitBackoff}.Start()
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil || attempt >= cp.attempts || errors.Is(err, ErrLeaseLost) || ctx.Err() != nil {
			return err
		}
		cp.mu.Lock()
		st.stats.Retries++
		cp.mu.Unlock()
		if serr := wait.Wait(ctx, cp.clk); serr != nil {
			return fmt.Errorf("%w (gave up waiting to retry: %w)", err, serr)
		}
	}
}

// fire checkpoints every registered shard once and returns the commit errors.
func (cp *Checkpointer) fire(ctx context.Context) error {
	type entry struct {
		shard string
		st    *shardState
	}
	cp.mu.Lock()
	var todo []entry
	for shard, st := range cp.shards {
		if st.committer != nil {
			todo = append(todo, entry{shard, st})
		}
	}
	cp.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(cp.parallel)
	errs := make([]error, len(todo))
	for i, e := range todo {
		g.Go(func() error {
			errs[i] = cp.fireShard(ctx, e.shard, e.st)
			return nil
		})
	}
	_ = g.Wait() // the goroutines return nil; their errors are in errs
	return errors.Join(errs...)
}

// fireShard checkpoints one shard if it is still registered.
func (cp *Checkpointer) fireShard(ctx context.Context, shard string, st *shardState) error {
	if err := st.acquire(ctx); err != nil {
		return nil // shutting down: nothing was attempted
	}
	defer st.release()
	cp.mu.Lock()
	c := st.committer
	cp.mu.Unlock()
	if c == nil {
		return nil // removed while waiting
	}
	return cp.commitLatest(ctx, shard, st, c)
}

// Run checkpoints every registered shard every Interval until ctx is done
// (it returns ctx.Err(): stop now, no last checkpoint) or Close is called (it
// returns nil after finishing the round in progress; Close then makes the
// last checkpoint). The first round runs one Interval after Run starts.
// Calling Run more than once is an error.
func (cp *Checkpointer) Run(ctx context.Context) error {
	cp.mu.Lock()
	if cp.runDone != nil {
		cp.mu.Unlock()
		return errors.New("checkpoint: Run called more than once")
	}
	if cp.closed {
		cp.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	cp.runDone = done
	cp.mu.Unlock()
	defer close(done)

	t := cp.clk.NewTicker(cp.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cp.stop:
			return nil
		case <-t.C():
			_ = cp.fire(ctx) // failures are counted and logged by commit
		}
	}
}

// Close shuts the Checkpointer down, in order: (1) Register starts returning
// ErrClosed; (2) Run is told to stop and Close waits for it to return; (3)
// every registered shard is checkpointed one last time with ctx; (4) every
// shard is unregistered. It returns the last round's commit errors joined
// (each names its shard), or ctx.Err() if ctx ended first. Close is
// idempotent: later calls wait for the first and return its result.
func (cp *Checkpointer) Close(ctx context.Context) error {
	cp.mu.Lock()
	first := !cp.closed
	cp.closed = true
	runDone := cp.runDone
	cp.mu.Unlock()
	if !first {
		select {
		case <-cp.closeDone:
			cp.mu.Lock()
			defer cp.mu.Unlock()
			return cp.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := cp.shutdown(ctx, runDone)
	cp.mu.Lock()
	cp.closeErr = err
	cp.mu.Unlock()
	close(cp.closeDone)
	return err
}

func (cp *Checkpointer) shutdown(ctx context.Context, runDone chan struct{}) error {
	close(cp.stop)
	if runDone != nil {
		select {
		case <-runDone:
		case <-ctx.Done():
			return fmt.Errorf("checkpoint: Close: waiting for Run: %w", ctx.Err())
		}
	}
	err := cp.fire(ctx)
	cp.mu.Lock()
	for _, st := range cp.shards {
		st.committer = nil
		st.stats.Registered = false
	}
	cp.mu.Unlock()
	return err
}

// Forget drops the state and counters of each of shards that is not
// registered and has no commit in flight, and leaves the others; their
// counts stay in the totals of Stats. A shard forgotten and registered
// again starts with zero counters, and a MarkShardEnd after it writes
// SHARD_END again: forget only shards the caller is done with.
func (cp *Checkpointer) Forget(shards ...string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, id := range shards {
		st, ok := cp.shards[id]
		if !ok || st.committer != nil {
			continue
		}
		select {
		case st.sem <- struct{}{}: // no commit in flight
		default:
			continue
		}
		cp.gone.Commits += st.stats.Commits
		cp.gone.Skips += st.stats.Skips
		cp.gone.Retries += st.stats.Retries
		cp.gone.Failures += st.stats.Failures
		cp.failing.Ended(id)
		delete(cp.shards, id)
		st.release() // a caller that took st before it was deleted works on it alone
	}
}

// Stats returns a snapshot of the counters.
func (cp *Checkpointer) Stats() checkpoint.Stats {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	s := cp.gone
	s.Shards = make(map[string]checkpoint.ShardStats, len(cp.shards))
	for shard, st := range cp.shards {
		s.Shards[shard] = st.stats
		s.Commits += st.stats.Commits
		s.Skips += st.stats.Skips
		s.Retries += st.stats.Retries
		s.Failures += st.stats.Failures
	}
	return s
}
