package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
)

// Stream is a typed stream of batches: a DStream. It has one batch per batch
// interval, or, downstream of a Window, one per slide interval, at the batch
// times that are multiples of that interval.
//
// A Stream is a node of the pipeline graph, made by From or by an operator
// (Map, Window, ...) and consumed by operators and outputs (ForEach, ...).
// A nil *Stream, which has no Pipeline to report the mistake to, makes the
// operator or output it is passed to panic at once, naming both.
// Nothing is computed until Run: then, for every batch, each output computes
// its stream from the sources up, and a stream used by several outputs is
// computed once per batch.
//
// Build the graph before calling Run, from one goroutine. A Stream must not
// be nil when passed to an operator.
type Stream[T any] struct {
	p *Pipeline
	n *node
	// Exactly one of compute and plan is set. compute returns the stream's
	// batch at r's time, which is a multiple of n.slide, as a whole: the
	// operators that need a whole batch (Transform, Window, state). plan
	// returns it as partitions (sources, narrow and keyed operators, Union),
	// which may not be computed yet. Each is called at most once per batch,
	// through at and parts.
	compute func(r *run) (*batch.Batch[T], error)
	plan    func(r *run) (*parted[T], error)
}

// node is the untyped part of a stream: what the driver needs to know to
// walk the graph.
type node struct {
	id    int
	op    string
	slide time.Duration
	// parents are the streams this one is computed from.
	parents []*node
	// fused tells a narrow operator's or a Union's stream: its plan runs
	// no user code, its consumers run its functions fused with theirs.
	fused bool
	// tick, if set, is called once per batch (before any output, parents
	// before children) so a stateful operator sees every batch of its
	// parent, whether or not an output asks for its own batch then.
	tick func(r *run) error
	// state, if set, is the state tick keeps, which the driver snapshots
	// with a recovery log (snapshot.go); declared is where the user's code
	// made the operator, "file.go:line" (see keepState).
	state    nodeState
	declared string
	// partitioned tells that the node's records are partitioned by key:
	// every record of a key comes from one shard (From with
	// PartitionedByKey). A stateful operator is refused on records of a
	// source sharing its shards unless every path from it to that source
	// goes through such a node (split.go).
	partitioned bool
	// keyedByShard tells that the node's own state is kept by keys each
	// of whose records comes from one shard (MapWithState with
	// PartitionedByKey): the node is accepted on a source sharing its
	// shards, and its output is not thereby declared partitioned.
	keyedByShard bool
	// partitionKey is the func(K) string a PartitionedBy declared, and
	// shardView the node's state kept per shard, if it is (pershard.go).
	partitionKey    any
	partitionKeyAny func(any) string
	shardView       shardView
}

// String names the node in error messages, such as "Window (stream 3)".
func (n *node) String() string { return fmt.Sprintf("%s (stream %d)", n.op, n.id) }

// run is the computation of one batch: the batch's input blocks, and the
// batches computed so far, by node id. Only the driver's goroutine uses it;
// the tasks it starts (see parallel) never do.
type run struct {
	ctx  context.Context
	job  *job
	memo []any
	// par is Config.Parallelism (0 is taken as 1), and shared tells, by
	// node id, the streams that more than one operator or output consumes
	// (nil: none), which are computed once and kept for the batch.
	par    int
	shared []bool
	// For the outputs' failure policies (failure.go): the clock and logger
	// of their retries, what each output's did (by output index), and the
	// quarantine pass running, if any, which the roots of the chains read
	// from the tasks' goroutines.
	clk    clock.Clock
	logger *slog.Logger
	outs   []OutputInfo
	iso    atomic.Pointer[isolation]
	// tracing is set while an output with Origins plans its stream (see
	// originBatch): parts then neither computes a shared stream nor
	// returns one computed before, so that the chain runs from the
	// source's partitions, for this output alone.
	tracing bool
	// progress is what the batch runs, for the still-running warning.
	progress progress
	// isolating is set while the quarantine pass of an output whose
	// stream failed as a whole plans that stream again (see fusedAgain):
	// parts then plans a narrow operator's stream whose failure it
	// memoised again, fused into its consumer, neither computing it nor
	// keeping the result, so that the pass runs its functions record by
	// record; another stream's failure (a source's, a keyed operator's)
	// it returns as it is, running nothing again.
	isolating bool
	// replaying is set for a completed batch replayed to rebuild the
	// state (engine.replay): the records an operator's Quarantine leaves
	// out are those the batch left out, whose letters were sent then.
	replaying bool
}

// Pipeline returns the Pipeline s belongs to: for a function that builds
// part of a graph from a stream and adds a source to it, as
// repartition.ByKey does.
func (s *Stream[T]) Pipeline() *Pipeline { return s.p }

// result is a memoised stream batch: as a whole, as partitions, or both.
type result[T any] struct {
	b   *batch.Batch[T]
	pt  *parted[T]
	err error
}

// validAt reports whether a stream with the given slide has a batch at t.
func validAt(t batch.Time, slide time.Duration) bool {
	ms := slide.Milliseconds()
	return ms > 0 && int64(t)%ms == 0
}

// at returns the stream's batch at r's time, or nil if the stream has no
// batch then (a window between two slides). It computes the batch on the
// first call for a batch time and remembers it for the others. For a
// stream computed as partitions, it runs them in parallel and gathers them
// in order: this is how the operators that need a whole batch (Transform,
// Window, ReduceByKeyAndWindow, UpdateStateByKey) consume a partitioned
// stream. Those that combine by key could run their per-batch step as a
// shuffle instead (see keyed), as ReduceByKey does.
func (s *Stream[T]) at(r *run) (*batch.Batch[T], error) {
	if !validAt(r.job.time, s.n.slide) {
		return nil, nil
	}
	m := s.memo(r)
	if m.b != nil || m.err != nil {
		return m.b, m.err
	}
	if s.compute != nil {
		m.b, m.err = s.compute(r)
		return m.b, m.err
	}
	pt, err := s.parts(r)
	if err == nil {
		pt, err = pt.compute(r.ctx, r.par)
	}
	if err != nil {
		m.err = err
		return nil, err
	}
	m.pt = pt
	m.b = pt.batch()
	return m.b, nil
}

// parts returns the stream's batch at r's time as partitions, or nil if the
// stream has no batch then. The partitions of a stream planned by narrow
// operators are not computed yet: the caller runs them, fused with what it
// does with their records, unless the stream is shared, in which case they
// are computed once here and kept for the other consumers. A batch computed
// as a whole is split into partitions of consecutive records.
func (s *Stream[T]) parts(r *run) (*parted[T], error) {
	if !validAt(r.job.time, s.n.slide) {
		return nil, nil
	}
	m := s.memo(r)
	// Planned again for origins: a chain of narrow operators (or a Union)
	// whose kept partitions carry no tracer. Not a source's (its kept
	// partitions are the ones traced) nor a keyed operator's kept result:
	// its records have no origin, and planning it again would run its map
	// side, and the user's functions in it, a second time.
	retrace := r.tracing && s.n.fused && m.pt != nil && m.pt.trace == nil
	retrace = retrace || r.isolating && m.err != nil && s.n.fused
	if (m.pt != nil || m.err != nil) && !retrace {
		if m.pt != nil {
			m.pt.iso = &r.iso
		}
		return m.pt, m.err
	}
	if s.compute != nil {
		b, err := s.at(r)
		if err != nil || b == nil {
			return nil, err
		}
		m.pt = split(b, r.par)
		m.pt.iso = &r.iso
		return m.pt, nil
	}
	pt, err := s.plan(r)
	if err == nil && r.shared != nil && r.shared[s.n.id] && !r.tracing && !r.isolating {
		pt, err = pt.compute(r.ctx, r.par)
	}
	if err != nil {
		if !r.isolating {
			m.err = err
		}
		return nil, err
	}
	if pt.data != nil && m.pt == nil {
		m.pt = pt // computed: keep it for at and the other consumers
		pt.iso = &r.iso
	}
	return pt, nil
}

// memo returns the stream's memoised result for r's batch, made empty on
// the first call.
func (s *Stream[T]) memo(r *run) *result[T] {
	if m, ok := r.memo[s.n.id].(*result[T]); ok {
		return m
	}
	m := &result[T]{}
	r.memo[s.n.id] = m
	return m
}

// newStream adds a stream computed as a whole batch to p's graph.
func newStream[T any](p *Pipeline, op string, slide time.Duration, parents []*node,
	compute func(r *run) (*batch.Batch[T], error)) *Stream[T] {
	return newStatefulStream(p, op, slide, parents, compute, nil)
}

// newPlanned adds a stream computed as partitions to p's graph.
func newPlanned[T any](p *Pipeline, op string, slide time.Duration, parents []*node,
	plan func(r *run) (*parted[T], error)) *Stream[T] {
	n := &node{op: op, slide: slide, parents: parents}
	p.addNode(n)
	return &Stream[T]{p: p, n: n, plan: plan}
}

// narrow adds a stream computed partition by partition from s by each, which
// calls yield with the records it makes of partition i of in (the batch of s),
// chunk by chunk, in order, each with the position of the chunk of in it was
// made from, and reports whether yield always returned true. With
// transient set, yield keeps none of the slices it is given (see
// parted.transient): each may then pass the same buffer again and again,
// and reads in with in.iter(transient).
// The partitions run later, fused with the operator or output that consumes
// the stream.
func narrow[T, U any](s *Stream[T], op string, each func(in *parted[T], i int, transient bool, yield func(int, []U) bool) bool) *Stream[U] {
	return narrowFold(s, op, each, nil)
}

// narrowFold is narrow with, if not nil, the fold of the stream's
// partitions (see parted.fold): fold calls yield with each record it makes
// of partition i of in, with the position of its chunk of in.
func narrowFold[T, U any](s *Stream[T], op string, each func(in *parted[T], i int, transient bool, yield func(int, []U) bool) bool,
	fold func(in *parted[T], i int, yield func(int, U))) *Stream[U] {
	out := newPlanned(s.p, op, s.n.slide, []*node{s.n}, func(r *run) (*parted[U], error) {
		in, err := s.parts(r)
		if err != nil || in == nil {
			return nil, err
		}
		pt := derived(in, func(i int, transient bool, yield func(int, []U) bool) bool { return each(in, i, transient, yield) })
		if fold != nil {
			pt.fold = func(i int, yield func(int, U)) { fold(in, i, yield) }
		}
		return pt, nil
	})
	out.n.fused = true
	return out
}

// newStatefulStream adds a stream with a tick (see node.tick) to p's graph.
func newStatefulStream[T any](p *Pipeline, op string, slide time.Duration, parents []*node,
	compute func(r *run) (*batch.Batch[T], error), tick func(r *run) error) *Stream[T] {
	n := &node{op: op, slide: slide, parents: parents, tick: tick}
	p.addNode(n)
	return &Stream[T]{p: p, n: n, compute: compute}
}

// mustExist panics at once when v, the *Stream or *Pipeline argument arg of
// op, is nil, naming op, arg and the fix. With no stream there is no
// Pipeline to record a graph error on (see requireFunc), and the nil would
// otherwise be dereferenced deep inside, with nothing to say which call
// passed it.
func mustExist[T any](op, arg string, v *T) {
	if v != nil {
		return
	}
	fix := "a stream made from a Pipeline (by From or an operator)"
	if _, ok := any(v).(*Pipeline); ok {
		fix = "a Pipeline made by NewPipeline"
	}
	panic(fmt.Sprintf("stream: %s: %s is nil: pass %s", op, arg, fix))
}

// requireFunc records a graph error on p if a function argument is nil:
// Run then refuses to start, so the nil function is never called.
func requireFunc(p *Pipeline, op string, parent *node, arg string, isNil bool) {
	if isNil {
		p.graphError(fmt.Errorf("%s of %v: %s is nil: pass a function", op, parent, arg))
	}
}
