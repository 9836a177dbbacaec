package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
)

// ErrClosed is returned by Run when the Pipeline has already run: a Pipeline
// runs at most once. A Run refused for an invalid graph (ErrInvalidConfig)
// does not count: the graph may be completed and Run called again.
var ErrClosed = errors.New("stream: context already run")

// BatchError is the error Run returns when a batch fails: an output returned
// an error, or a block could not be recomputed. Time is the batch time, so
// the failed batch can be found in logs and listener events.
type BatchError struct {
	Time batch.Time
	Err  error
}

// Error returns "stream: batch <time>: <cause>".
func (e *BatchError) Error() string { return "stream: batch " + e.Time.String() + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *BatchError) Unwrap() error { return e.Err }

type runState int

const (
	idle    runState = iota // built, Run not called yet
	running                 // in Run
	closed                  // Run returned
)

// Pipeline is the driver of a pipeline: it holds the graph of streams built
// with From and the operators, runs the receivers, cuts a batch every batch
// interval and runs the outputs on it, in batch-time order.
//
// Build the graph, then call Run once. Stop and Drain may be called from any
// goroutine, any number of times, before, during or after Run.
type Pipeline struct {
	cfg Config

	mu        sync.Mutex
	nodes     []*node
	sources   []sourceRunner
	outputs   []*output
	graphErrs []error
	state     runState
	stopped   bool // Stop was called
	draining  bool // Drain was called
	cancel    context.CancelFunc
	drainc    chan struct{} // closed by the first Drain
	log       metaLog       // nil: noLog; set by tests until recovery plugs in
	done      chan struct{} // closed when Run returns
}

// NewPipeline returns a Pipeline configured by cfg, or an error wrapping
// ErrInvalidConfig that names every bad field of cfg.
func NewPipeline(cfg Config) (*Pipeline, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Pipeline{
		cfg:    cfg.withDefaults(),
		drainc: make(chan struct{}),
		done:   make(chan struct{}),
	}, nil
}

// BatchInterval returns the batch interval, after defaults.
func (p *Pipeline) BatchInterval() time.Duration { return p.cfg.BatchInterval }

// addNode adds n to the graph and sets its id.
func (p *Pipeline) addNode(n *node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n.id = len(p.nodes)
	p.nodes = append(p.nodes, n)
	p.lateLocked(n.String())
}

// lateLocked logs a graph change made after Run started: it is ignored.
func (p *Pipeline) lateLocked(what string) {
	if p.state != idle {
		p.cfg.Logger.Error("stream: graph changed after Run: ignored; build the whole graph before calling Run", "node", what)
	}
}

// graphError records a problem of the graph; Run reports it.
func (p *Pipeline) graphError(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.graphErrs = append(p.graphErrs, err)
}

// Validate reports the problems of the graph built so far that Run would
// refuse to start with, wrapped in ErrInvalidConfig: invalid window lengths
// and slides, nil functions, streams of another Pipeline, and no output.
func (p *Pipeline) Validate() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.validateLocked()
}

func (p *Pipeline) validateLocked() error {
	problems := slices.Clone(p.graphErrs)
	if len(p.outputs) == 0 {
		problems = append(problems, errors.New("no output: add ForEach, ForEachBatch or Print to a stream before Run"))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
}

// Run runs the pipeline: it starts every receiver in its own goroutine, cuts
// a batch at every multiple of the batch interval and runs the outputs on
// the batches in batch-time order, one batch at a time.
//
// With Config.Recovery, Run first opens the recovery log and reads it. If
// the log was written by a pipeline of another shape (other sources or
// outputs, or another order; see Shape and Named), Run refuses to start
// with an error wrapping recovery.ErrShapeChanged that says what changed
// and how to start fresh; on a first start it records the shape. Then it
// resumes: the batches allocated but not completed run first, each with
// its logged time and blocks (recomputed by their receivers from their
// ranges, since the block store did not survive); blocks stored but not
// allocated go into the next batch; block IDs continue the logged
// numbering; new batch times come after the last logged one; and receivers
// learn where each shard resumes through source.Runtime.ResumeAfter. While
// it runs, every stored block, allocation and completion is appended to the
// log before anything depends on it, and a failed append stops Run with
// that error: the log's state is then unknown, and a restart recovers from
// what it holds. Run closes the log before it returns.
//
// Run returns when:
//   - Stop was called: nil, at once, without running the batches still
//     pending (their blocks were never completed, so they are read again
//     after a restart). If Stop was called before Run, Run returns nil
//     without starting anything.
//   - Drain was called: nil, once every stored block has been processed.
//     If Drain was called before Run, Run starts and drains at once.
//   - ctx is done: ctx.Err(), stopping as Stop does.
//   - a receiver's Start failed: that error, wrapped.
//   - a batch failed: a *BatchError naming the batch time.
//
// In every case, every goroutine the Pipeline started has ended. Run refuses
// to start, with an error wrapping ErrInvalidConfig, if the graph is invalid
// (see Validate) — the Pipeline then stays unstarted, so the graph may be
// fixed and Run called again — and returns ErrClosed if the Pipeline already
// ran.
func (p *Pipeline) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.state != idle {
		p.mu.Unlock()
		return ErrClosed
	}
	if err := p.validateLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	if p.stopped {
		p.state = closed
		close(p.done)
		p.mu.Unlock()
		return nil
	}
	e := newEngine(p)
	runCtx, cancel := context.WithCancel(ctx)
	p.state, p.cancel = running, cancel
	p.mu.Unlock()

	err := e.run(runCtx, p.drainc)
	cancel()

	p.mu.Lock()
	requested := p.stopped || p.draining
	p.state = closed
	p.mu.Unlock()
	close(p.done)

	switch {
	case err != nil:
		return err
	case requested:
		return nil
	}
	return ctx.Err()
}

// Stop stops the pipeline now: it cancels the receivers and the batch
// running, drops the batches pending, and waits until every goroutine the
// Pipeline started has ended. Blocks stored but not completed are not
// reported as completed, so their records are read again after a restart.
// Called before Run, it only makes Run return nil at once.
//
// Stop is safe to call more than once and from any goroutine, but not from
// an output function or a Listener (it would wait for itself): from there,
// call it in a new goroutine. After Stop, Run returns nil.
func (p *Pipeline) Stop() {
	p.mu.Lock()
	p.stopped = true
	if p.state == running {
		p.cancel()
	}
	wait := p.state != idle
	p.mu.Unlock()
	if wait {
		<-p.done
	}
}

// Drain stops the pipeline gracefully: it asks every receiver to stop (each
// pushes what it holds), then keeps cutting and running batches, at their
// usual batch times, until every stored block has been processed, and waits
// until every goroutine the Pipeline started has ended. Called before Run,
// it returns at once and Run drains as soon as it has started the receivers.
// A receiver that does not stop keeps Drain waiting: call Stop, or cancel
// Run's ctx, to give up.
//
// Drain is safe to call more than once and from any goroutine, but not from
// an output function or a Listener. After Drain, Run returns nil unless a
// batch or a receiver failed meanwhile.
func (p *Pipeline) Drain() {
	p.mu.Lock()
	if !p.draining {
		p.draining = true
		close(p.drainc)
	}
	wait := p.state != idle
	p.mu.Unlock()
	if wait {
		<-p.done
	}
}
