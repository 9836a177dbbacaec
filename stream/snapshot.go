package stream

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
)

// nodeState is the state of a stateful operator, as the driver snapshots it
// (DESIGN.md, "State: snapshot + lineage"). Its methods are called from the
// batch loop only, between batches.
type nodeState interface {
	// check reports whether the state's types can be encoded: Run refuses
	// to start with a recovery log otherwise.
	check() error
	// snapshot encodes the state after the last batch ticked.
	snapshot() ([]byte, error)
	// restore replaces the state with one snapshot encoded.
	restore(data []byte) error
	// quiet reports whether a batch at t with no records, ticked now,
	// would change nothing the operator computes from then on and would
	// emit nothing to the nodes used reports as used: an operator holding
	// no state, a window of empty batches, a MapWithState whose snapshots
	// are unused with no key to time out at t. The driver then logs such a
	// batch as it logs an empty batch of a pipeline without state (a
	// reserved batch time) and a replay leaves it out, which gives the
	// same state.
	quiet(t batch.Time, used func(*node) bool) bool
}

// windowed is the nodeState of a window operator (Window,
// ReduceByKeyAndWindow).
type windowed interface {
	// unwindowed returns, after the batch at t, the time of the next
	// window and how many of the kept batches with records are in no
	// window output yet.
	unwindowed(t batch.Time) (next batch.Time, batches int)
}

// snapshotVersion is the version of the snapshot envelope this weir writes
// and reads.
const snapshotVersion = 1

// snapshotFile is what the driver stores as one snapshot: the state of every
// stateful operator after the batch at Time, in graph order, each named by
// its operator so that a changed graph is refused rather than misread.
type snapshotFile struct {
	Version int
	Time    int64
	Ops     []string
	Data    [][]byte
}

// stateKeeper snapshots the stateful operators of a Run every interval
// and restores them on a restart. It is used by the batch loop only.
type stateKeeper struct {
	nodes []*node // reachable nodes with state, parents first
	store *recoverylog.Log
	log   *recoveryLog
	every time.Duration
	last  batch.Time // time of the current snapshot, or of the first batch after the empty state's
	taken batch.Time // time of the current snapshot, the one a restart loads
	// failed counts the snapshots in a row that could not be stored,
	// tried again after each batch; failedAt is the batch of the first.
	failed   int
	failedAt batch.Time
}

func (k *stateKeeper) ops() []string {
	ops := make([]string, len(k.nodes))
	for i, n := range k.nodes {
		ops[i] = n.op
	}
	return ops
}

// stateProblemsLocked returns, for a pipeline with a recovery log, a problem
// for every stateful operator whose state cannot be encoded. p.mu is held.
func (p *Pipeline) stateProblemsLocked() []error {
	if p.cfg.Recovery == nil {
		return nil
	}
	var problems []error
	for _, n := range p.nodes {
		if n.state == nil {
			continue
		}
		if err := n.state.check(); err != nil {
			problems = append(problems, fmt.Errorf("%v: its state cannot be snapshotted, which Config.Recovery needs: %w; "+
				"give the operator a codec for that type with stream.StateCodec, or change the type "+
				"(exported fields, no channels or functions, interfaces registered with gob.Register)", n, err))
		}
	}
	return problems
}

// openState prepares the stateful operators of a Run with recovery log l,
// whose state at open was st: it loads the current snapshot and queues the
// batches completed after it for replay, before the pending ones. On a
// first start with state it records the empty state as the current
// snapshot, so that the log keeps from now on the batches a restart must
// replay. Without stateful operators it does nothing, unless the log has a
// snapshot (a pipeline that had state): then it goes on recording empty
// snapshots, so that the log does not keep every batch for a replay, and a
// snapshot holding state is refused as a changed graph.
func (e *engine) openState(ctx context.Context, l *recoverylog.Log, st *recoverylog.State) error {
	var nodes []*node
	for _, n := range e.ticks {
		if n.state != nil {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 && st.Snapshot == nil {
		return nil
	}
	if !l.KeepsSnapshots() && len(nodes) > 0 {
		return fmt.Errorf("stream: the recovery log %T keeps no state snapshots (recovery.SnapshotStore), which the pipeline's stateful operators need: "+
			"use recovery.Dir or recovery/dynamolog", l.Store())
	}
	rl, _ := e.log.(*recoveryLog)
	if rl != nil {
		rl.toSnapshot = true
	}
	k := &stateKeeper{nodes: nodes, store: l, log: rl, every: e.cfg.StateSnapshotInterval}
	if st.Snapshot == nil {
		var t batch.Time
		if st.HasCompleted {
			t = st.LastCompleted
			e.cfg.Logger.Warn("stream: the recovery log has no state snapshot but completed batches: the state starts empty after them",
				"batch", t)
		}
		if err := l.Append(ctx, recoverylog.SnapshotTaken(t, "")); err != nil {
			return fmt.Errorf("stream: record the empty state in the recovery log: %w", err)
		}
		k.last, k.taken = t, t
		e.state = k
		return nil
	}
	k.last, k.taken = st.Snapshot.Time, st.Snapshot.Time
	if st.Snapshot.Ref != "" {
		if err := k.restore(ctx, *st.Snapshot); err != nil {
			return err
		}
	}
	replay := make([]*job, 0, len(st.Replay))
	records := 0
	for _, b := range st.Replay {
		j, err := e.recoveredJob(b.Time, b.Blocks)
		if err != nil {
			return err
		}
		j.replay = true
		records += j.records
		replay = append(replay, j)
	}
	e.recovered = append(replay, e.recovered...)
	e.state = k
	e.cfg.Logger.Info("stream: state restored from a snapshot; replaying the batches completed after it",
		"snapshot", st.Snapshot.Time, "replay", len(replay), "records", records)
	return nil
}

// restore loads the snapshot ref into the operators.
func (k *stateKeeper) restore(ctx context.Context, ref recoverylog.SnapshotRef) error {
	data, err := k.store.GetSnapshot(ctx, ref)
	if err != nil {
		return fmt.Errorf("stream: load the state snapshot at %v: %w", ref.Time, err)
	}
	var f snapshotFile
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&f); err != nil {
		return fmt.Errorf("stream: decode the state snapshot at %v: %w", ref.Time, err)
	}
	if f.Version != snapshotVersion {
		return fmt.Errorf("stream: the state snapshot at %v has version %d, this weir reads version %d", ref.Time, f.Version, snapshotVersion)
	}
	if ops := k.ops(); !slices.Equal(f.Ops, ops) || len(f.Data) != len(ops) {
		return fmt.Errorf("%w: the stateful operators were %v when the state snapshot at %v was taken, now %v; "+
			"restore the pipeline, or start fresh by deleting the recovery log (the state is then lost)",
			recovery.ErrShapeChanged, f.Ops, ref.Time, ops)
	}
	for i, n := range k.nodes {
		if err := n.state.restore(f.Data[i]); err != nil {
			return fmt.Errorf("stream: restore %v from the state snapshot at %v: %w", n, ref.Time, err)
		}
	}
	return nil
}

// idleSnapshotEvery is how often, at most, the state is snapshotted after
// the empty batches of a run (emptyRun): an idle pipeline writes one entry
// per 10 s and a little more, its runs, and one snapshot per
// idleSnapshotEvery, so that the two stay within one entry per 10 s; a
// restart replays the empty batches since the snapshot for the state, at
// most this long of them, which read nothing from the sources (6,000
// calls of an UpdateStateByKey's update per key, with 200 ms batches:
// BenchmarkRestartIdleReplay).
const idleSnapshotEvery = 20 * time.Minute

// afterBatch snapshots the state after the completed batch at t if the
// interval has passed since the current snapshot (for an empty batch of a
// run, inRun, idleSnapshotEvery if longer): the snapshot is stored,
// then recorded in the log. A snapshot that cannot be stored is logged and
// tried again after the next batch (the log keeps the batches to replay
// meanwhile); a failed append stops the Run, as any. A state that cannot be
// encoded fails the Run with an error naming the operator, the type and the
// fix: encoding fails the same way after every batch, and going on would
// leave the state unprotected against a crash without anyone noticing.
func (e *engine) afterBatch(ctx context.Context, t batch.Time, inRun bool) error {
	k := e.state
	if k == nil {
		return nil
	}
	if k.last == 0 {
		// The empty state recorded at a first start (time 0): the
		// interval counts from the first batch that completes, not from
		// 1970, or the first non-empty batch would always be snapshotted
		// (idle batches before it are not logged, so they never were).
		k.last = t
		return nil
	}
	every := k.every
	if inRun {
		every = max(every, idleSnapshotEvery)
	}
	if t.Sub(k.last) < every {
		return nil
	}
	_, err := e.snapshot(ctx, t, snapshotAgain)
	return err
}

// snapshotAgain is what follows a snapshot that afterBatch could not
// store.
const snapshotAgain = "trying again after the next batch"

// finalSnapshot snapshots the state after the batch at t, the last a Run
// ran, when its drain has completed every batch, unless the current
// snapshot is of that batch already: a restart after a graceful stop then
// loads the state as the Run left it and replays no batch (without it, a
// restart replayed every batch since the last snapshot, up to
// StateSnapshotInterval of them, re-reading their ranges from the source).
// It is called once the Run's goroutines have ended, so it is alone with
// the state. It reports whether the snapshot was recorded; one that
// cannot be stored is logged, and the restart replays as after a crash.
func (e *engine) finalSnapshot(ctx context.Context, t batch.Time) (bool, error) {
	k := e.state
	if k == nil || e.unfinished || t <= k.taken {
		return false, nil
	}
	return e.snapshot(ctx, t, "a restart replays the batches completed since the last one")
}

// snapshot stores the state after the completed batch at t, then records
// it in the log, and reports whether it did. A snapshot that cannot be
// stored is logged at WARN, saying what then happens (then), and the fix;
// afterBatch's, tried again after every batch, only the first of a
// streak (the later ones at DEBUG), and the first stored after them at
// INFO. A failed append stops the Run, as any. A state that cannot be encoded is an
// error naming the operator, the type and the fix.
func (e *engine) snapshot(ctx context.Context, t batch.Time, then string) (bool, error) {
	k := e.state
	if len(k.nodes) == 0 {
		// No state: an empty snapshot only releases the batches kept for
		// a replay.
		if k.log != nil && k.log.snapshotTaken(ctx, t, "") == nil {
			k.last, k.taken = t, t
			return true, nil
		}
		return false, nil
	}
	f := snapshotFile{Version: snapshotVersion, Time: int64(t), Ops: k.ops(), Data: make([][]byte, len(k.nodes))}
	for i, n := range k.nodes {
		b, err := n.state.snapshot()
		if err != nil {
			return false, fmt.Errorf("stream: cannot snapshot the state of %v after the batch at %v, so it would not survive a crash: %w; "+
				"fix: register the concrete types stored in interface values with gob.Register, or give the operator a codec for the type with stream.StateCodec",
				n, t, err)
		}
		f.Data[i] = b
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(f); err != nil {
		return false, fmt.Errorf("stream: cannot encode the state snapshot after the batch at %v: %w", t, err)
	}
	ref, err := k.store.PutSnapshot(ctx, t, buf.Bytes())
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		k.failed++
		if k.failed == 1 {
			k.failedAt = t
		}
		if k.failed > 1 && then == snapshotAgain {
			e.cfg.Logger.Debug("stream: cannot store the state snapshot; "+then, "batch", t, "failures", k.failed, "err", err)
			return false, nil
		}
		e.cfg.Logger.Warn("stream: cannot store the state snapshot; "+then+" (logged once until one is stored)", "batch", t, "err", err,
			"fix", "the error says why the recovery log's store refused it: free disk space (a directory log), raise the DynamoDB table's write capacity or make it on-demand (recovery/dynamolog); "+
				"meanwhile the log keeps every batch since the last snapshot, which a restart replays")
		return false, nil
	}
	if k.failed > 0 {
		e.cfg.Logger.Info("stream: state snapshot stored again after failing", "batch", t, "failures", k.failed, "since", k.failedAt)
		k.failed = 0
	}
	if k.log == nil {
		return false, nil
	}
	if err := k.log.snapshotTaken(ctx, t, ref); err != nil {
		return false, nil // fatal: the recovery log stops the Run
	}
	k.last, k.taken = t, t
	e.cfg.Logger.Debug("stream: state snapshot taken", "batch", t, "bytes", buf.Len())
	return true, nil
}

// replay recomputes the replayed batch j for its state only: the stateful
// operators see it as in the run that completed it, its outputs do not run
// again and nothing is logged. A panic in a state's function fails it as
// it fails a batch run for the first time (see process).
func (e *engine) replay(ctx context.Context, j *job) error {
	r := &run{ctx: ctx, job: j, memo: make([]any, e.nodes), par: e.cfg.Parallelism,
		clk: e.cfg.Clock, logger: e.cfg.Logger, outs: e.outputInfos(), replaying: true}
	for _, n := range e.ticks {
		if err := safely(func() error { return n.tick(r) }); err != nil {
			return batchError(j.time, fmt.Errorf("replaying the completed batch to rebuild the state: %v: %w", n, err))
		}
	}
	return nil
}

// snapWriter builds an operator's snapshot: a sequence of unsigned varints
// and length-prefixed byte strings.
type snapWriter struct{ buf []byte }

func (w *snapWriter) uint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }

func (w *snapWriter) int(v int64) { w.buf = binary.AppendVarint(w.buf, v) }

func (w *snapWriter) bytes(b []byte) {
	w.uint(uint64(len(b)))
	w.buf = append(w.buf, b...)
}

// values appends vs encoded with c.
func snapValues[T any](w *snapWriter, c Codec[T], vs []T) error {
	b, err := encode(c, vs)
	if err != nil {
		return fmt.Errorf("values of type %v cannot be encoded with %T: %w", reflect.TypeFor[T](), c, err)
	}
	w.bytes(b)
	return nil
}

// snapReader reads what a snapWriter wrote; the first error sticks.
type snapReader struct {
	buf []byte
	err error
}

var errSnapShort = errors.New("snapshot cut short")

func (r *snapReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 {
		r.err = errSnapShort
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

func (r *snapReader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.buf)
	if n <= 0 {
		r.err = errSnapShort
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// count reads a length and checks it is not more than the bytes left
// could hold (every counted item takes at least one byte).
func (r *snapReader) count() int {
	n := r.uint()
	if r.err == nil && n > uint64(len(r.buf)) {
		r.err = fmt.Errorf("count %d, with %d bytes left", n, len(r.buf))
		return 0
	}
	return int(n)
}

func (r *snapReader) bytes() []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.buf)) {
		r.err = errSnapShort
		return nil
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}

// snapRead reads n values encoded with c.
func snapRead[T any](r *snapReader, c Codec[T], n int) []T {
	b := r.bytes()
	if r.err != nil {
		return nil
	}
	vs, err := decode(c, b)
	if err == nil && len(vs) != n {
		err = fmt.Errorf("decoded %d values, want %d", len(vs), n)
	}
	if err != nil {
		r.err = err
		return nil
	}
	return vs
}

// done returns the reader's error, or one if bytes are left over.
func (r *snapReader) done() error {
	if r.err == nil && len(r.buf) > 0 {
		r.err = fmt.Errorf("%d bytes left over", len(r.buf))
	}
	return r.err
}
