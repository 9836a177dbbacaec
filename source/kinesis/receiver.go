package kinesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/lineage"
	"github.com/weirstream/weir/source"
)

// Receiver reads a Kinesis stream and pushes its records in blocks that
// remember the sequence ranges they came from: it implements
// source.Receiver[Record]. Create one with New. Its methods are safe for
// concurrent use. A Receiver runs once: after Start returned it cannot be
// started again.
type Receiver struct {
	cfg      Config // with defaults
	stats    statsCollector
	progress *progress
	budget   *budget
	ranges   shardRanges // of the shards listed, for convert

	clientMu sync.Mutex
	client   Client // built on first use when cfg.Client is nil

	turns shardTurns // whose Recompute reads a shard (readRanges)

	lease atomic.Pointer[leaseRun] // set by Start with Config.Leases, kept after

	// recovered holds the shards whose blocks the recovery log held
	// uncompleted at Start have completed (see run.completedThrough).
	recovered recoveredShards

	// endChecked, set by tests before Start, is told each time the lease
	// side judges a drained shard: ready to be marked SHARD_END or not.
	endChecked func(shard string, ready bool)
	// forgetChecked, set by tests before Start, is told each time the
	// lease side judges a shard another worker finished, read here or held
	// in the recovery log, or, without leases, a shard read to its end or
	// the unlisted parent of a listed one that the log may hold: ready to
	// be logged finished or not (leaseRun.forgetFinished,
	// shardSync.forgetFinished).
	forgetChecked func(shard string, ready bool)

	rateMu sync.Mutex
	est    estimator // with Config.Backpressure; tests set its tuning before Start
	shared *limiter  // the receiver-wide read rate, set by Start; nil before

	mu      sync.Mutex
	started bool
	rt      *source.Runtime[Record] // while Start runs, for ReportError and Logger
	stopCh  chan struct{}           // closed by the first Stop
	done    chan struct{}           // closed when Start returns
}

// defaultBatchInterval is the period of the shared read rate when the
// driver does not give its batch interval: the driver's default
// (stream.DefaultBatchInterval).
const defaultBatchInterval = time.Second

var (
	_ source.Receiver[Record]   = (*Receiver)(nil)
	_ source.CompletionObserver = driverHooks{}
	_ source.BatchObserver      = driverHooks{}
)

// New validates cfg and returns a Receiver. The error, wrapping
// ErrInvalidConfig, lists every problem of cfg. New makes no network call:
// the stream is checked by Start.
func New(cfg Config) (*Receiver, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var est estimator
	if cfg.Backpressure {
		rc := rateConfig{}.withDefaults()
		est = estimator{cfg: rc, rate: rc.InitialRate}
	}
	return &Receiver{
		est:      est,
		cfg:      cfg,
		progress: newProgress(),
		budget:   newBudget(),
		client:   cfg.Client,
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
	}, nil
}

// run is the state of one Start call.
type run struct {
	r      *Receiver
	cfg    Config
	client Client
	gen    *source.BlockGenerator[Record]
	clock  clock.Clock
	logger *slog.Logger
	retry  *retrier
	// resumeAfter is the Runtime's ResumeAfter (nil: no recovery log).
	resumeAfter func(stream, shard string) (string, bool)
	// uncompleted is the Runtime's Uncompleted (nil: no recovery log).
	uncompleted func(stream, shard string) (string, bool)
	// loggedUntil is the Runtime's LoggedUntil (zero: a first start, or no
	// recovery log).
	loggedUntil time.Time
	// ahead is how far the clock ran ahead of Kinesis's at Start, by the
	// Date of its answer to checkStream (whole seconds, rounded down: an
	// over-estimate); 0 if it did not, or the answer had no Date.
	ahead time.Duration
	// finished is the Runtime's ShardFinished (nil: no recovery log),
	// called once a shard's SHARD_END is in the lease table.
	finished func(ctx context.Context, stream, shard string) error
	// fanOut is set with Config.FanOut: readers subscribe through it.
	fanOut *fanOut
	// shared is the read rate of every shard together (Backpressure).
	shared *limiter
	// readers counts the running shard readers, who share shared.
	readers atomic.Int64
	// batchInterval and blockInterval are the Runtime's (with defaults;
	// batchInterval 0: the driver does not say): readers time their reads
	// at the tip to the batches (see alignedWait).
	batchInterval, blockInterval time.Duration
}

// Start checks that the stream exists, then reads it and pushes blocks
// through rt.Push until Stop (returns nil) or ctx is done (returns
// ctx.Err()). It returns an error wrapping ErrStreamNotFound, naming the
// stream, before reading anything if the stream does not exist; any error
// a shard reader cannot recover from, or a push that failed after its
// retries, stops the receiver and is returned.
//
// Step by step on Stop: shard listing and every shard reader stop (a batch
// of records being added either lands whole or not at all), and the block
// generator seals and pushes what it holds. With Config.Leases the receiver
// then waits, at most a lease duration, for the driver to complete what it
// read, writes the last checkpoints and hands every lease back. Then Start
// returns.
func (r *Receiver) Start(ctx context.Context, rt source.Runtime[Record]) error {
	rt = rt.WithDefaults()
	if err := r.begin(rt); err != nil {
		return err
	}
	rt.Observe(driverHooks{r}) // before the first push, as Observe asks
	defer r.end()
	rn, err := r.prepare(ctx, rt)
	if err != nil || rn == nil {
		return err
	}
	if ok, err := rn.startFanOut(ctx); !ok {
		return err
	}
	defer rn.stopFanOut(ctx)
	if r.cfg.Leases == nil {
		return rn.serve(ctx, r.stopCh, r.cfg.assigner)
	}
	lr, err := newLeaseRun(ctx, rn, rt)
	if err != nil {
		return err
	}
	r.lease.Store(lr)
	return lr.run(ctx, r.stopCh)
}

// begin marks the receiver started, once, and keeps rt (with defaults) for
// runtime.
func (r *Receiver) begin(rt source.Runtime[Record]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("kinesis: Start called more than once: a Receiver runs once, create a new one with New")
	}
	r.started = true
	r.rt = &rt
	return nil
}

// end marks Start as returned.
func (r *Receiver) end() {
	r.mu.Lock()
	r.rt = nil
	r.mu.Unlock()
	close(r.done)
}

// prepare builds the client and checks the stream. It returns a nil run
// and a nil error when Stop came first. rt has its defaults.
func (r *Receiver) prepare(ctx context.Context, rt source.Runtime[Record]) (*run, error) {
	ctx, cancel := r.untilStop(ctx)
	defer cancel()
	rn := &run{r: r, cfg: r.cfg, clock: r.cfg.Clock, logger: r.cfg.Logger, resumeAfter: rt.ResumeAfter, uncompleted: rt.Uncompleted, loggedUntil: rt.LoggedUntil, finished: rt.ShardFinished,
		batchInterval: rt.BatchInterval, blockInterval: rt.BlockInterval}
	if rn.clock == nil {
		rn.clock = rt.Clock
	}
	if rn.logger == nil {
		rn.logger = rt.Logger
	}
	rn.logger = rn.logger.With("stream", r.cfg.Stream, "app", r.cfg.App)
	client, err := r.clientFor(ctx)
	if err == nil {
		rn.client = client
		rn.retry = r.newRetrier(client, rn.clock, rn.logger)
		err = rn.checkStream(ctx)
	}
	if err != nil {
		if r.stopping() && ctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	if r.stopping() {
		return nil, nil
	}
	r.budget.setLimit(rt.MaxBufferedBytes)
	rn.gen = source.NewBlockGenerator(rt, rn.onStored)
	r.rateMu.Lock()
	rn.shared = newLimiter(rn.clock, r.est.rate, cmp.Or(rt.BatchInterval, defaultBatchInterval)) // rate 0: no limit
	r.shared = rn.shared
	r.rateMu.Unlock()
	return rn, nil
}

// untilStop returns a context that is also cancelled by Stop, so that
// the checks Start makes before reading do not delay a Stop. The returned
// function cancels it and waits for its watcher goroutine.
func (r *Receiver) untilStop(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-r.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); <-exited }
}

// stopping reports whether Stop was called.
func (r *Receiver) stopping() bool {
	select {
	case <-r.stopCh:
		return true
	default:
		return false
	}
}

// checkStream makes sure the stream exists before anything starts.
func (rn *run) checkStream(ctx context.Context) error {
	stream := streamRef(rn.cfg.Stream)
	in := &awskinesis.DescribeStreamSummaryInput{StreamName: stream.name(), StreamARN: stream.arn()}
	out, err := do(ctx, rn.retry, rn.cfg.MaxAttempts, "DescribeStreamSummary", "", func(ctx context.Context) (*awskinesis.DescribeStreamSummaryOutput, error) {
		return rn.client.DescribeStreamSummary(ctx, in)
	})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("%w: %q at %s: %w", ErrStreamNotFound, rn.cfg.Stream, placeOf(rn.cfg, rn.client), err) // err ends with the fix (withFix)
	case err != nil:
		return fmt.Errorf("kinesis: checking stream %q: %w", rn.cfg.Stream, err)
	}
	if date, ok := awsmiddleware.GetServerTime(out.ResultMetadata); ok {
		rn.ahead = max(rn.clock.Now().Sub(date), 0)
	}
	if s := out.StreamDescriptionSummary; s != nil {
		rn.logger.Info("kinesis: stream found", "status", string(s.StreamStatus), "open_shards", aws.ToInt32(s.OpenShardCount))
	}
	return nil
}

// logged returns the greatest sequence number of shardID the driver's
// recovery log holds (Runtime.ResumeAfter), and whether there is one.
func (rn *run) logged(shardID string) (string, bool) {
	if rn.resumeAfter == nil {
		return "", false
	}
	seq, ok := rn.resumeAfter(rn.cfg.Stream, shardID)
	return seq, ok && isSeq(seq)
}

// serve runs the block generator and the assigner (which runs the shard
// readers) until stop, an error or ctx.
func (rn *run) serve(ctx context.Context, stop <-chan struct{}, a assigner) error {
	if a == nil {
		a = allShards{}
	}
	genCtx, cancelGen := context.WithCancel(ctx)
	defer cancelGen()
	genErr := make(chan error, 1)
	go func() { genErr <- rn.gen.Run(genCtx) }() // owned here: genErr is always received below

	readCtx, cancelRead := context.WithCancel(ctx)
	defer cancelRead()
	ctl := newControl(readCtx, rn)
	ctl.group.Go(func() error {
		if err := a.assign(ctl.ctx, ctl); err != nil && ctl.ctx.Err() == nil {
			return fmt.Errorf("kinesis: assigner: %w", err)
		}
		return nil
	})

	var runErr error
	graceful := false
	select {
	case <-stop:
		graceful = true
	case <-ctl.ctx.Done(): // a reader or the assigner failed, or ctx is done
	case runErr = <-genErr:
		genErr <- runErr
	}
	readErr := ctl.close(cancelRead)
	switch {
	case ctx.Err() != nil:
		cancelGen()
		<-genErr
		return ctx.Err()
	case readErr != nil:
		cancelGen()
		<-genErr
		return readErr
	case !graceful:
		return <-genErr
	}
	if err := rn.gen.Stop(ctx); err != nil {
		cancelGen()
		<-genErr
		return fmt.Errorf("kinesis: flushing blocks on stop: %w", err)
	}
	return <-genErr
}

// Stop asks Start to stop reading, push what it holds and return, and waits
// for it or for ctx. Safe to call more than once, and before Start (Start
// then returns nil at once).
func (r *Receiver) Stop(ctx context.Context) error {
	r.mu.Lock()
	select {
	case <-r.stopCh:
	default:
		close(r.stopCh)
	}
	started := r.started
	r.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onStored advances the stored sequence numbers of a stored block's shards
// (never before the push returned) and reports shards that drained.
func (rn *run) onStored(ctx context.Context, info batch.BlockInfo) {
	for _, ev := range rn.r.progress.stored(info.Ranges) {
		rn.shardEnded(ctx, ev)
	}
}

// shardEnded tells the leases that a shard drained, with what this run
// stored of it (the lease side adds the recovered blocks: see
// run.completedThrough), and the tests, through Config.onShardEnd, with the
// number the shard's end waits to see completed (see run.endSeq).
func (rn *run) shardEnded(ctx context.Context, ev drainEvent) {
	if lr := rn.r.lease.Load(); lr != nil {
		lr.drained(ev)
	}
	if rn.cfg.onShardEnd != nil {
		rn.cfg.onShardEnd(ctx, ev.shard, rn.endSeq(ev.shard, ev.lastSeq))
	}
}

// driverHooks are the receiver's hooks the driver calls, registered in
// Start with source.Runtime.Observe, so that they are no methods of
// Receiver a user could call.
type driverHooks struct{ r *Receiver }

// BlocksCompleted implements source.CompletionObserver (see
// Receiver.blocksCompleted).
func (h driverHooks) BlocksCompleted(ctx context.Context, blocks []batch.BlockInfo) {
	h.r.blocksCompleted(ctx, blocks)
}

// BatchCompleted implements source.BatchObserver (see
// Receiver.batchCompleted).
func (h driverHooks) BatchCompleted(ctx context.Context, b source.BatchReport) {
	h.r.batchCompleted(ctx, b)
}

// blocksCompleted is told by the driver, in batch-time order, once every
// output of the batch holding blocks succeeded. Each block's shards'
// completed sequence numbers move forward to its ranges' Last (never
// back), and the bytes their records held in the budget
// (source.Runtime.MaxBufferedBytes) are given back. With Config.Leases and no
// shared recovery log, these are the numbers the checkpoints record
// (DESIGN.md, guarantee G4). It may be called during or after Start.
func (r *Receiver) blocksCompleted(_ context.Context, blocks []batch.BlockInfo) {
	var uncompleted func(stream, shard string) (string, bool)
	if rt := r.runtime(); rt != nil {
		uncompleted = rt.Uncompleted
	}
	moved := false
	for _, b := range blocks {
		r.budget.giveBack(b.Ranges)
		r.recovered.completed(uncompleted, r.cfg.Stream, b.Ranges)
		if r.progress.completed(b.Ranges) {
			moved = true
		}
	}
	if lr := r.lease.Load(); moved && lr != nil {
		lr.signal()
	}
}

// batchCompleted is told by the driver of each batch that completed: with
// Config.Backpressure, each one updates the read rate (DESIGN.md, "Memory
// and flow control"). Without it, it does nothing. It may be called during
// or after Start.
func (r *Receiver) batchCompleted(_ context.Context, b source.BatchReport) {
	if !r.cfg.Backpressure {
		return
	}
	r.rateMu.Lock()
	defer r.rateMu.Unlock()
	rate, ok := r.est.update(b)
	if ok && r.shared != nil {
		r.shared.setRate(rate)
	}
}

// readRate returns the read rate backpressure set, in records/s over all
// shards: 100 until the first batch with records is reported; 0 (no
// limit) without Config.Backpressure.
func (r *Receiver) readRate() float64 {
	r.rateMu.Lock()
	defer r.rateMu.Unlock()
	return r.est.rate
}

// CheckpointStats returns the checkpointer's counters (commits, skips,
// failures, per shard). It is the zero Stats without Config.Leases or
// before Start.
func (r *Receiver) CheckpointStats() checkpoint.Stats {
	if lr := r.lease.Load(); lr != nil {
		return lr.cp.Stats()
	}
	return checkpoint.Stats{}
}

// HeldLeases returns the leases this worker holds now, as last written;
// nil without Config.Leases or before Start. After a graceful Stop it holds
// none (they were handed back).
func (r *Receiver) HeldLeases() []leasetable.Lease {
	if lr := r.lease.Load(); lr != nil {
		held := lr.coord.Held()
		out := make([]leasetable.Lease, len(held))
		for i, l := range held {
			out[i] = l.Public()
		}
		return out
	}
	return nil
}

// ShardAncestors implements source.ShardLineage: the ancestors of the
// shards of stream whose leases the receiver holds, nearest first, at most
// lineage.MaxAncestors of a shard: the parents its lease names, then
// theirs as the last shard list (ListShards, every ShardSyncInterval:
// the shards within the stream's retention) or the last scan of the lease
// table names them. It makes no call. It returns nil without
// Config.Leases, for another stream, or when no shard held has a parent.
func (r *Receiver) ShardAncestors(stream string) map[string][]string {
	if stream != r.StreamName() {
		return nil
	}
	if lr := r.lease.Load(); lr != nil {
		return lr.coord.Ancestors(lineage.MaxAncestors)
	}
	return nil
}

// WorkerID returns this worker's lease owner name (Config.Leases.WorkerID
// or its default), "" without Config.Leases.
func (r *Receiver) WorkerID() string {
	if r.cfg.Leases == nil {
		return ""
	}
	return r.cfg.Leases.WorkerID
}

// Stats returns a snapshot of the receiver's counters and shard states.
func (r *Receiver) Stats() Stats {
	s := r.stats.snapshot()
	s.Shards = r.progress.snapshot()
	r.stats.addShards(s.Shards)
	if lr := r.lease.Load(); lr != nil {
		s.BadLeaseItems = lr.coord.BadItems()
		s.RefusedShards = lr.refusedCount()
		for shard, n := range lr.coord.Given() {
			if s.Shards == nil {
				s.Shards = make(map[string]ShardStats)
			}
			st := s.Shards[shard]
			st.HandedBack = n
			s.Shards[shard] = st
		}
	}
	s.BufferedBytes, s.PeakBufferedBytes = r.budget.usage()
	return s
}

// clientFor returns the Kinesis client, building the default one on first
// use.
func (r *Receiver) clientFor(ctx context.Context) (Client, error) {
	r.clientMu.Lock()
	defer r.clientMu.Unlock()
	if r.client != nil {
		return r.client, nil
	}
	c, err := newDefaultClient(ctx, r.cfg)
	if err != nil {
		return nil, err
	}
	r.client = c
	return c, nil
}

// runtime returns the Runtime of the running Start, or nil.
func (r *Receiver) runtime() *source.Runtime[Record] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rt
}
