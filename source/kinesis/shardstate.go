package kinesis

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/dynamochunk"
	"github.com/weirstream/weir/internal/hashkey"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/shardstate"
	"github.com/weirstream/weir/internal/streak"
	"github.com/weirstream/weir/source"
)

// State per shard (source.ShardState; DESIGN.md, "State per shard"): when
// the driver keeps the state of its stateful operators by shard, the lease
// run moves each shard's state with its lease through a store in DynamoDB
// (the lease table's name + "-state"):
//
//   - taking a lease, it claims the shard's state in the store (fencing
//     off the previous owner's late writes), loads the shard's snapshot (or,
//     for a shard a reshard made that has none, its parents' last ones)
//     into the driver, and reads after the checkpoint or the snapshot,
//     whichever is later;
//   - every checkpoint interval, it stores the snapshot of each held
//     shard whose state moved, and the checkpointer commits no further than
//     the last snapshot stored, so a successor that loads it neither
//     misses nor counts twice a record in the state;
//   - a hand-off, a drain and a shard's end store the snapshot first and
//     the last checkpoint after it, so the next owner (or a child shard)
//     starts where this one stopped; that snapshot drops the shard's state
//     in the driver in the same step (source.ShardStateHandOver), so no
//     batch run before the lease goes times out its keys a second time;
//   - a lease lost drops the shard's state, storing nothing.

// errStateDecode wraps a snapshot the driver could not load: written by a
// pipeline of other state types (the fix is the user's).
var errStateDecode = errors.New("kinesis: the driver could not load a shard's state")

// errStateEncode wraps a snapshot the driver could not take: a state its
// codec cannot encode, or a user function that panics while the driver
// snapshots it (the fix is the user's). It fails the same way at every
// try, so it stops the receiver: going on, the shard's checkpoints would
// stay at its last snapshot and a shard read to its end would never be
// marked SHARD_END, with nothing but a warning at every interval.
var errStateEncode = errors.New("kinesis: the driver could not snapshot a shard's state " +
	"(fix the codec or function that failed; a restart reads the shard again after its last snapshot)")

// stateSuffix is appended to the lease table's name to name the table of
// shard states.
const stateSuffix = "-state"

// maxTableName is the longest DynamoDB table name.
const maxTableName = 255

// stateClient is what the shard state store needs of the lease table's
// DynamoDB client.
type stateClient interface {
	shardstate.Client
	dynamochunk.TableClient
}

// stateRun is the lease run's side of state per shard.
type stateRun struct {
	states source.ShardState
	store  shardstate.Store
	db     stateClient
	table  string
	app    string

	saveMu sync.Mutex // one save at a time

	mu   sync.Mutex
	held map[string]*heldState // by shard: those loaded
}

// heldState is a shard whose state is loaded.
type heldState struct {
	shard source.Shard
	// claim is the lease the state was claimed and loaded under: every
	// snapshot of this hold is stored under it, so that one taken before
	// the lease was lost, stored after this worker took the lease back,
	// is fenced off by the claims of the workers that held it meanwhile,
	// as a later lease counter would not be.
	claim shardstate.Lease
	// durable is the position of the last snapshot stored or loaded, ""
	// if none: the checkpointer commits no further.
	durable string
	// stored: the store holds a snapshot of the shard (loaded or put).
	stored bool
	// sum is the SHA-256 of the data of that snapshot, if stored: a final
	// save compares it with the state's, which moves without records too
	// (a MapWithState's timeouts, an UpdateStateByKey's updates of idle
	// keys).
	sum [sha256.Size]byte
	// last is the final snapshot, taken with the drop of the shard's
	// state in the driver (source.ShardStateHandOver), nil before: the
	// saves after it store it if it is not stored yet (a failed store
	// tried again), the drop has nothing left to drop.
	last *lastSnapshot
}

// lastSnapshot is a shard's final snapshot: its data and position.
type lastSnapshot struct {
	data []byte
	upTo string
}

// newStateRun returns the state side of a lease run whose lease table
// client is db, or nil if the driver keeps no state per shard.
func newStateRun(states source.ShardState, db any, cfgTable, app string, lr *leaseRun) (*stateRun, error) {
	if states == nil {
		return nil, nil
	}
	c, ok := db.(stateClient)
	if !ok {
		return nil, fmt.Errorf("kinesis: the lease table's DynamoDB client %T has no BatchWriteItem, which state per shard needs to store snapshots: "+
			"give leasetable.Config.DynamoDB a *dynamodb.Client", db)
	}
	table := cfgTable + stateSuffix
	if len(table) > maxTableName {
		return nil, fmt.Errorf("%w: Leases.TableName of %d characters: must be at most %d with state per shard, whose snapshots "+
			"are kept in the table named after it with %q appended (at most %d characters): choose a shorter name",
			ErrInvalidConfig, len(cfgTable), maxTableName-len(stateSuffix), stateSuffix, maxTableName)
	}
	// Each attempt is bounded as the lease table's are: a silent connection
	// must not hold a save, and the loads, drops and hand-offs behind it.
	store, err := shardstate.NewDynamo(shardstate.DynamoConfig{Client: c, Table: table, Logger: lr.log, Clock: lr.rn.clock,
		AttemptTimeout: lease.WithDefaults(lr.cfg).AttemptTimeout})
	if err != nil {
		return nil, fmt.Errorf("kinesis: shard state store: %w", err)
	}
	return &stateRun{states: states, store: store, db: c, table: table, app: app, held: make(map[string]*heldState)}, nil
}

var _ stateClient = (*dynamodb.Client)(nil)

// stateEnsureMaxUnanswered is how many calls in a row ensureTable lets
// fail in a way a retry may heal (no answer, every attempt timed out; a
// refused or cut connection, a server error, throttling) before it fails
// the receiver: as many as the lease table's start-up does.
const stateEnsureMaxUnanswered = 10

// stateEnsureWait paces the calls of ensureTable after a failure that
// came at once (a refused connection, a server error); an unanswered one
// took its attempts' timeouts, which pace the next.
var stateEnsureWait = backoff.Policy{Base: 25 * time.Millisecond, Max: time.Second}

// ensureTable creates the store's table if it does not exist, each attempt
// of its calls bounded by the lease table's AttemptTimeout, as the store's
// are. A DynamoDB that does not answer, or fails a call in a way a retry
// may heal, is logged at WARN at once, naming the endpoint and the fix,
// and again as the failures go on (5 in a row); ensureTable fails after
// stateEnsureMaxUnanswered of them. A call DynamoDB refuses for good, or
// a table it finds of another key or of a status no wait cures, fails it
// at once.
func (sr *stateRun) ensureTable(ctx context.Context, lr *leaseRun) error {
	clk := lr.rn.clock
	mw := attempt.Middleware(clk, lease.WithDefaults(lr.cfg).AttemptTimeout)
	opts := []func(*dynamodb.Options){func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, mw) }}
	silent := streak.Streak{
		Logger: lr.log, Clock: clk, Prefix: "kinesis", Service: "DynamoDB", Op: "DescribeTable",
		Attr: slog.String("table", sr.table), Endpoint: awsconf.DynamoDBEndpoint(ctx, sr.db),
		MaxAttempts: stateEnsureMaxUnanswered, Fix: stateTableFix,
	}
	wait := stateEnsureWait.Start()
	for call := 1; ; call++ {
		err := shardstate.EnsureTable(ctx, sr.db, clk, lr.log, sr.table, opts...)
		var op *smithy.OperationError // a call's error, not one on the table EnsureTable found
		cause := "timeout"
		if !errors.Is(err, attempt.ErrTimeout) {
			cause = "error"
		}
		switch {
		case err == nil:
			silent.Ended(call)
			return nil
		case ctx.Err() != nil || !errors.As(err, &op) || awserr.Refused(err):
			return fmt.Errorf("kinesis: shard state table: %w", err)
		case call == stateEnsureMaxUnanswered && cause == "timeout":
			return fmt.Errorf("kinesis: shard state table %s: DynamoDB answered none of %d calls in a row: %w; fix: %s",
				sr.table, call, err, silent.FixFor(cause))
		case call == stateEnsureMaxUnanswered:
			return fmt.Errorf("kinesis: shard state table %s: DynamoDB failed %d calls in a row: %w; fix: %s",
				sr.table, call, err, silent.FixFor(cause))
		}
		silent.Failed(call, cause, true, err)
		if cause == "timeout" {
			continue // the attempts' timeouts paced this call
		}
		if err := wait.Wait(ctx, clk); err != nil {
			return fmt.Errorf("kinesis: shard state table: %w", err)
		}
	}
}

// stateTableFix is the fix of a DynamoDB that does not answer, or cannot
// be reached by, the shard state table's calls.
func stateTableFix(cause, endpoint string) string {
	what := " does not answer within Leases.AttemptTimeout"
	if cause != "timeout" {
		what = " cannot be reached or keeps failing"
	}
	return "DynamoDB at " + endpoint + what + ": check Leases.Endpoint, the region (AWS_REGION), proxies and the network"
}

func (sr *stateRun) key(lr *leaseRun, shard string) shardstate.Key {
	return shardstate.Key{Application: sr.app, Stream: lr.rn.cfg.Stream, Shard: shard, Shape: sr.states.Shape()}
}

// shardOf returns the shard and its hash key range, from the lease or
// the stream's shard list.
func (lr *leaseRun) shardOf(ctx context.Context, id, start, end string) (source.Shard, error) {
	if _, ok := hashkey.ParseRange(start, end); !ok {
		r, err := lr.rn.hashRange(ctx, id)
		if err != nil {
			return source.Shard{}, fmt.Errorf("kinesis: the hash key range of shard %s: %w", id, err)
		}
		start, end = r.Start.String(), r.End.String()
	}
	return source.Shard{Stream: lr.rn.cfg.Stream, ID: id, StartingHashKey: start, EndingHashKey: end}, nil
}

// load claims and loads the state of a shard whose lease l was taken,
// and returns the position of the snapshot loaded ("" if none). A state
// of another pipeline shape is returned as an error that stops the
// receiver: its fix is the user's.
func (sr *stateRun) load(ctx context.Context, lr *leaseRun, l lease.Lease) (string, error) {
	// No save runs meanwhile: one that took its snapshot before a loss
	// must not store it over what the take loads.
	sr.saveMu.Lock()
	defer sr.saveMu.Unlock()
	sh, err := lr.shardOf(ctx, l.Shard, l.StartingHashKey, l.EndingHashKey)
	if err != nil {
		return "", err
	}
	key := sr.key(lr, l.Shard)
	claim := shardstate.Lease{Counter: l.Counter, Owner: l.Owner}
	if err := sr.store.Claim(ctx, key, claim); err != nil {
		return "", fmt.Errorf("kinesis: claim the state of shard %s: %w", l.Shard, err)
	}
	var data [][]byte
	pos, stored, sum := "", false, [sha256.Size]byte{}
	snap, err := sr.store.Get(ctx, key)
	switch {
	case err == nil:
		data, pos, stored, sum = [][]byte{snap.Data}, snap.Position.Sequence, true, sha256.Sum256(snap.Data)
	case errors.Is(err, shardstate.ErrNoSnapshot):
		// A shard a reshard made starts from its parents' last states,
		// restricted to its range (the driver places the keys).
		for _, p := range l.Parents {
			ps, err := sr.store.Get(ctx, sr.key(lr, p))
			switch {
			case err == nil:
				data = append(data, ps.Data)
			case errors.Is(err, shardstate.ErrNoSnapshot):
			default:
				return "", fmt.Errorf("kinesis: the state of shard %s's parent %s: %w", l.Shard, p, err)
			}
		}
	default:
		return "", fmt.Errorf("kinesis: the state of shard %s: %w", l.Shard, err)
	}
	if err := sr.states.Load(ctx, sh, data...); err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", errStateDecode, err)
		}
		return "", err
	}
	sr.mu.Lock()
	sr.held[l.Shard] = &heldState{shard: sh, claim: claim, durable: pos, stored: stored, sum: sum}
	sr.mu.Unlock()
	return pos, nil
}

// save stores the snapshot of a held shard if its position moved since
// the last one, under the lease its state was claimed with, if this
// worker holds the shard's lease now. A final save (a
// hand-off, a drain, a shard's end) also stores a state whose position did
// not move if it differs from the one stored (keys timed out or updated in
// batches without records of the shard: the next owner must not have them
// back), or if the store has none of the shard (a reshard's child loaded
// from its parents that read no record, whose own children look for it).
// A final save drops the shard's state in the driver with its snapshot, in
// one step, if the driver can (source.ShardStateHandOver): a batch run
// between the snapshot and a later drop would time out or close keys the
// next owner loads and times out again. The saves after it store that
// snapshot if it is not stored yet. A worker that no longer holds the
// lease stores nothing.
func (sr *stateRun) save(ctx context.Context, lr *leaseRun, shard string, final bool) error {
	sr.saveMu.Lock()
	defer sr.saveMu.Unlock()
	sr.mu.Lock()
	h := sr.held[shard]
	sr.mu.Unlock()
	if h == nil {
		return nil
	}
	data, upTo, err := sr.snapshot(ctx, h, final)
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", errStateEncode, err)
		}
		return err
	}
	if upTo == "" || upTo == h.durable {
		if !final || h.stored && sha256.Sum256(data) == h.sum {
			return nil
		}
		upTo = h.durable // the position of the state loaded or stored
	}
	if _, ok := lr.heldLease(shard); !ok {
		return nil
	}
	snap := shardstate.Snapshot{Data: data, Position: shardstate.Position{Sequence: upTo}, Lease: h.claim}
	if err := sr.store.Put(ctx, sr.key(lr, shard), snap); err != nil {
		return fmt.Errorf("kinesis: store the state of shard %s: %w", shard, err)
	}
	sr.mu.Lock()
	h.durable, h.stored, h.sum = upTo, true, sha256.Sum256(data)
	sr.mu.Unlock()
	return nil
}

// snapshot returns the snapshot of held shard h: its last one if taken,
// else, with final, its last one taken now with the drop of its state if
// the driver can, else the state as it is. saveMu is held.
func (sr *stateRun) snapshot(ctx context.Context, h *heldState, final bool) ([]byte, string, error) {
	if h.last != nil {
		return h.last.data, h.last.upTo, nil
	}
	ho, ok := sr.states.(source.ShardStateHandOver)
	if !final || !ok {
		return sr.states.Snapshot(ctx, h.shard)
	}
	data, upTo, err := ho.SnapshotAndDrop(ctx, h.shard)
	if err != nil {
		return nil, "", err
	}
	h.last = &lastSnapshot{data: data, upTo: upTo}
	return data, upTo, nil
}

// saveAll saves every held shard, reporting failures.
func (sr *stateRun) saveAll(ctx context.Context, lr *leaseRun, final bool) {
	sr.mu.Lock()
	shards := slices.Collect(maps.Keys(sr.held))
	sr.mu.Unlock()
	for _, s := range shards {
		switch err := sr.save(ctx, lr, s, final); {
		case err == nil:
			lr.stateCallOK(&lr.unsaved, s, "kinesis: shard states are stored again")
		case ctx.Err() == nil:
			lr.stateFailed(s, err)
		}
	}
}

// drop forgets a shard's state, here and in the driver.
func (sr *stateRun) drop(ctx context.Context, lr *leaseRun, shard string) {
	sr.saveMu.Lock()
	defer sr.saveMu.Unlock()
	sr.mu.Lock()
	h := sr.held[shard]
	delete(sr.held, shard)
	sr.mu.Unlock()
	if h == nil || h.last != nil { // none, or dropped with its last snapshot
		return
	}
	if err := sr.states.Drop(ctx, h.shard); err != nil && ctx.Err() == nil {
		lr.log.Warn("kinesis: dropping the state of a shard no longer read", "shard", shard, "err", err)
	}
}

// capped returns seq, or the position of the shard's last snapshot if
// lower: what the checkpointer may commit.
func (sr *stateRun) capped(shard, seq string) (string, bool) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	h := sr.held[shard]
	if h == nil || h.durable == "" {
		return "", false
	}
	if batch.CompareSeq(h.durable, seq) < 0 {
		return h.durable, true
	}
	return seq, true
}

// heldLease returns the lease this worker holds on shard now.
func (lr *leaseRun) heldLease(shard string) (lease.Lease, bool) {
	for _, l := range lr.coord.Held() {
		if l.Shard == shard {
			return l, true
		}
	}
	return lease.Lease{}, false
}

// stateFailed handles a failed snapshot: a fenced one means another worker
// took the lease (its loss follows); one the driver could not take stops
// the receiver (errStateEncode); any other is a failure to store, after
// which the checkpoint stays at the last snapshot stored: warned about and
// reported once per kind of failure until the snapshots of every shard
// that failed so are stored (saveAll says so), logged at DEBUG meanwhile, so that an outage of the
// state table is one warning, not one per shard at every checkpoint
// interval.
func (lr *leaseRun) stateFailed(shard string, err error) {
	switch {
	case errors.Is(err, shardstate.ErrFenced):
		lr.log.Warn("kinesis: another worker took a shard's state; its loss follows", "shard", shard, "err", err)
	case errors.Is(err, errStateEncode):
		lr.mu.Lock()
		lr.fatal = cmp.Or(lr.fatal, err)
		lr.mu.Unlock()
		lr.signal() // the assigner returns it
	default:
		lr.stateCallFailed(&lr.unsaved, shard, err,
			"kinesis: storing a shard's state failed; its checkpoint stays at its last snapshot stored, and the next checkpoint interval tries again "+
				"(logged once until the state of every shard that failed is stored)")
	}
}

// stateCallFailed records that a call of the state table for shard failed
// with err, in the runs of failures f (of loads, or of stores), grouped by
// kind of failure (streak.Kind): the first of a run of its kind is logged
// at WARN with msg and the fix, and reported; the others at DEBUG. So one
// shard failing for a reason of its own does not hide an outage of the
// table on the others.
func (lr *leaseRun) stateCallFailed(f *streak.Kinds, shard string, err error, msg string) {
	lr.mu.Lock()
	kind, first, failing := f.Failed(shard, err, lr.rn.clock.Now())
	lr.mu.Unlock()
	if !first {
		lr.log.Debug(msg, "shard", shard, "kind", kind, "err", err, "shards_failing", failing)
		return
	}
	lr.log.Warn(msg, "shard", shard, "kind", kind, "err", err,
		"fix", "check that the state table "+lr.state.table+" exists, that these credentials may read and write it, and its capacity")
	lr.report(err)
}

// stateCallOK records that a call of the state table for shard succeeded,
// in the runs of failures f: for each run of a kind it ends, msg says so
// at INFO.
func (lr *leaseRun) stateCallOK(f *streak.Kinds, shard, msg string) {
	lr.mu.Lock()
	over, _ := f.Ended(shard)
	lr.mu.Unlock()
	for kind, since := range over {
		lr.log.Info(msg, "shard", shard, "kind", kind, "failing_for", lr.rn.clock.Now().Sub(since).Round(time.Millisecond))
	}
}

// saveLoop stores the held shards' snapshots every checkpoint interval
// until ctx is done.
func (sr *stateRun) saveLoop(ctx context.Context, lr *leaseRun) {
	t := lr.rn.clock.NewTicker(lr.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			sr.saveAll(ctx, lr, false)
		}
	}
}

// after reports whether reading after seq starts later in the shard than
// reading from p: always for an initial position, since a snapshot at seq
// holds every record up to it.
func (p position) after(seq string) bool {
	switch {
	case p.After != "":
		return batch.CompareSeq(seq, p.After) > 0
	case p.At != "":
		return batch.CompareSeq(seq, p.At) >= 0
	}
	return true
}

// loadFailed handles a shard whose state could not be loaded when its
// lease was taken: fenced, another worker took it (its loss follows); a
// state of another pipeline shape, or one that does not decode, stops the
// receiver (the fix is the user's: the error says it); any other failure
// (DynamoDB unreachable, throttled past the SDK's retries) is tried again
// at the next round of the assigner, while the lease is held: the shard is
// not read meanwhile. Such failures are warned about and reported once
// per kind of failure until every shard that failed so loads (or is let
// go), and logged at DEBUG meanwhile: an outage of DynamoDB on many shards is one warning, not two per
// shard at every try.
func (lr *leaseRun) loadFailed(ctx context.Context, l lease.Lease, err error) {
	log := lr.log.With("shard", l.Shard)
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, shardstate.ErrFenced):
		// Another worker took the lease since (its loss follows, and
		// drops the retry), or the lease's counter went back below the
		// state's fence (a lease re-created or edited): then the shard is
		// not read until the fence is lowered, and the error says so at
		// every try.
		log.Warn("kinesis: the state of a newly leased shard is fenced at a higher lease counter; not reading it, trying again", "err", err)
		lr.report(fmt.Errorf("kinesis: shard %s: %w (if this worker holds the lease, its counter went back below the state's fence: "+
			"a lease re-created or edited; delete the shard's state head item in the %s table to read it from its checkpoint with empty state)",
			l.Shard, err, lr.state.table))
		lr.retryAcquire(l.Shard, lr.shardEndRetry())
	case errors.Is(err, shardstate.ErrShapeChanged), errors.Is(err, shardstate.ErrCorrupt), errors.Is(err, shardstate.ErrInvalid),
		errors.Is(err, errStateDecode):
		lr.mu.Lock()
		lr.fatal = cmp.Or(lr.fatal, err)
		lr.mu.Unlock()
	default:
		lr.stateCallFailed(&lr.unloaded, l.Shard, err,
			"kinesis: loading the state of a newly leased shard failed; not reading it until it loads, trying again "+
				"(logged once until the state of every shard that failed loads)")
		lr.retryAcquire(l.Shard, lr.shardEndRetry())
	}
}

// retryAcquire has the assigner acquire shard again at its first round
// after the given time, under the lease held then: a failed load waits a
// retry period (shardEndRetry; the assigner's ticker wakes it), so that a
// throttled or unreachable state table is not called again at every
// completed batch.
func (lr *leaseRun) retryAcquire(shard string, after time.Duration) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.reload == nil {
		lr.reload = make(map[string]time.Time)
	}
	at := lr.rn.clock.Now().Add(after)
	if old, ok := lr.reload[shard]; !ok || at.Before(old) {
		lr.reload[shard] = at
	}
}

// settled reports whether every record this worker added to a block of
// the shard of l, or of one of its parents, is completed.
func (lr *leaseRun) settled(l lease.Lease) bool {
	for _, s := range append([]string{l.Shard}, l.Parents...) {
		if !lr.allAddedCompleted(s) {
			return false
		}
	}
	return true
}
