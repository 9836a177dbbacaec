package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/weirstream/weir/batch"
)

// Stream is a typed stream of batches: a DStream. It has one batch per batch
// interval, or, downstream of a Window, one per slide interval, at the batch
// times that are multiples of that interval.
//
// A Stream is a node of the pipeline graph, made by From or by an operator
// (Map, Window, ...) and consumed by operators and outputs (ForEach, ...).
// Nothing is computed until Run: then, for every batch, each output computes
// its stream from the sources up, and a stream used by several outputs is
// computed once per batch.
//
// Build the graph before calling Run, from one goroutine. A Stream must not
// be nil when passed to an operator.
type Stream[T any] struct {
	p *Pipeline
	n *node
	// compute returns the stream's batch at r's time, which is a multiple of
	// n.slide. It is called at most once per batch, through at.
	compute func(r *run) (*batch.Batch[T], error)
}

// node is the untyped part of a stream: what the driver needs to know to
// walk the graph.
type node struct {
	id    int
	op    string
	slide time.Duration
	// parents are the streams this one is computed from.
	parents []*node
	// tick, if set, is called once per batch (before any output, parents
	// before children) so a stateful operator sees every batch of its
	// parent, whether or not an output asks for its own batch then.
	tick func(r *run) error
	// state, if set, is the state tick keeps, which the driver snapshots
	// with a recovery log (snapshot.go).
	state nodeState
}

// String names the node in error messages, such as "Window (stream 3)".
func (n *node) String() string { return fmt.Sprintf("%s (stream %d)", n.op, n.id) }

// run is the computation of one batch: the batch's input blocks, and the
// batches computed so far, by node id.
type run struct {
	ctx  context.Context
	job  *job
	memo []any
}

// result is a memoised stream batch.
type result[T any] struct {
	b   *batch.Batch[T]
	err error
}

// validAt reports whether a stream with the given slide has a batch at t.
func validAt(t batch.Time, slide time.Duration) bool {
	ms := slide.Milliseconds()
	return ms > 0 && int64(t)%ms == 0
}

// at returns the stream's batch at r's time, or nil if the stream has no
// batch then (a window between two slides). It computes the batch on the
// first call for a batch time and remembers it for the others.
func (s *Stream[T]) at(r *run) (*batch.Batch[T], error) {
	if !validAt(r.job.time, s.n.slide) {
		return nil, nil
	}
	if m, ok := r.memo[s.n.id].(*result[T]); ok {
		return m.b, m.err
	}
	b, err := s.compute(r)
	r.memo[s.n.id] = &result[T]{b: b, err: err}
	return b, err
}

// newStream adds a stream to p's graph.
func newStream[T any](p *Pipeline, op string, slide time.Duration, parents []*node,
	compute func(r *run) (*batch.Batch[T], error)) *Stream[T] {
	return newStatefulStream(p, op, slide, parents, compute, nil)
}

// newStatefulStream adds a stream with a tick (see node.tick) to p's graph.
func newStatefulStream[T any](p *Pipeline, op string, slide time.Duration, parents []*node,
	compute func(r *run) (*batch.Batch[T], error), tick func(r *run) error) *Stream[T] {
	n := &node{op: op, slide: slide, parents: parents, tick: tick}
	p.addNode(n)
	return &Stream[T]{p: p, n: n, compute: compute}
}

// derive adds a stream computed batch by batch from s by fn, with s's slide.
func derive[T, U any](s *Stream[T], op string, fn func(ctx context.Context, b *batch.Batch[T]) (*batch.Batch[U], error)) *Stream[U] {
	return newStream(s.p, op, s.n.slide, []*node{s.n}, func(r *run) (*batch.Batch[U], error) {
		b, err := s.at(r)
		if err != nil || b == nil {
			return nil, err
		}
		return fn(r.ctx, b)
	})
}

// requireFunc records a graph error on p if a function argument is nil:
// Run then refuses to start, so the nil function is never called.
func requireFunc(p *Pipeline, op string, parent *node, arg string, isNil bool) {
	if isNil {
		p.graphError(fmt.Errorf("%s of %v: %s is nil: pass a function", op, parent, arg))
	}
}
