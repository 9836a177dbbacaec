package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/lineage"
	"github.com/weirstream/weir/internal/runname"
)

// ErrClosed is returned by Run when the Pipeline has already run: a Pipeline
// runs at most once, and is closed once its Run returned (it has no Close
// method). A Run refused for an invalid graph (ErrInvalidConfig)
// does not count: the graph may be completed and Run called again.
var ErrClosed = errors.New("stream: pipeline already ran")

// BatchError is the error Run returns when a batch fails: an output returned
// an error, a user function panicked, or a block could not be recomputed.
// Time is the batch time, so the failed batch can be found in logs and
// listener events.
type BatchError struct {
	Time batch.Time
	Err  error
	// Panic is the value a user function (an operator's, an output's)
	// panicked with while the batch ran, and Stack the stack of the
	// goroutine that panicked, as runtime/debug.Stack gives it; both are
	// nil if nothing panicked. The panic is recovered, so the process
	// goes on and Run returns this error, as for an output's error.
	Panic any
	Stack []byte
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

// Pipeline is weir's driver: it holds the graph of streams built with From
// and the operators, runs the receivers, cuts a batch every batch interval
// and runs the outputs on it, in batch-time order.
//
// Build the graph, then call Run once: a stream or output added once Run has
// started is ignored, and logged at ERROR (to Config.Logger, slog.Default()
// unless set). Stop, Drain and Done may be called
// from any goroutine, any number of times, before, during or after Run;
// Stop and Drain also from an output (Drain with the output's ctx, see
// Drain) or a Listener. Waiting on Done from inside the pipeline never ends.
type Pipeline struct {
	cfg Config

	mu           sync.Mutex
	nodes        []*node
	sources      []sourceRunner
	outputs      []*output
	graphErrs    []error
	quarantiners []*keyedDead // the keyed, window, state and Transform operators with Quarantine, in order
	state        runState
	stopped      bool                    // Stop was called
	draining     bool                    // a drain was requested
	cancel       context.CancelCauseFunc // cancels the Run's context; set while running
	eng          *engine                 // the Run's engine; set while running
	drainc       chan struct{}           // closed when the first drain is requested
	log          metaLog                 // nil: noLog; set by tests until recovery plugs in
	finished     chan struct{}           // closed by Run once the engine has ended (Drain waits for it)
	done         chan struct{}           // closed by Run once every goroutine has ended
}

// NewPipeline returns a Pipeline configured by cfg, or an error wrapping
// ErrInvalidConfig that names every bad field of cfg.
func NewPipeline(cfg Config) (*Pipeline, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Pipeline{
		cfg:      cfg.withDefaults(),
		drainc:   make(chan struct{}),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
	}, nil
}

// BatchInterval returns the batch interval, after defaults; 0 for a nil
// Pipeline.
func (p *Pipeline) BatchInterval() time.Duration {
	if p == nil {
		return 0
	}
	return p.cfg.BatchInterval
}

// errNilPipeline is the error of method called on a nil *Pipeline (a
// variable left unset, or NewPipeline's result used despite its error).
func errNilPipeline(method string) error {
	return fmt.Errorf("%w: %s: Pipeline is nil: make it with NewPipeline, and check its error", ErrInvalidConfig, method)
}

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
// and slides, nil functions, streams of another Pipeline, no output, and
// state that would be split across workers (ErrSplitState). A nil
// Pipeline is refused too.
func (p *Pipeline) Validate() error {
	if p == nil {
		return errNilPipeline("Validate")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.validateLocked()
}

func (p *Pipeline) validateLocked() error {
	problems := slices.Clone(p.graphErrs)
	problems = append(problems, p.stateProblemsLocked()...)
	problems = append(problems, p.splitProblemsLocked()...)
	problems = append(problems, p.shardProblemsLocked()...)
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
// When ctx is done, Run drains, as Drain does: the receivers stop
// gracefully (they push what they hold, hand their shards back and write
// their last checkpoints) and the stored blocks are processed. The drain is
// bounded by Config.DrainTimeout: past it, Run stops now, as Stop does. The
// values of ctx are kept for the whole Run; only its cancellation starts
// the drain. So the program
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	context.AfterFunc(ctx, stop) // signals no longer caught once the drain starts
//	err = p.Run(ctx)
//
// drains on Ctrl-C and returns nil; a second Ctrl-C, no longer caught,
// stops the program at once.
//
// Run returns:
//   - nil after a requested shutdown: ctx done, Drain or Stop, once the
//     drain has finished or, for Stop, at once, without running the batches
//     still pending (their blocks were never completed, so they are read
//     again after a restart). If Stop was called before Run, Run returns nil
//     without starting anything; if Drain was, Run starts and drains at once.
//   - a *DrainError naming what was left if a drain did not finish within
//     its bound (Config.DrainTimeout, or the ctx given to Drain).
//   - the error of a receiver's Start, wrapped, if it failed.
//   - a *BatchError naming the batch time, if a batch failed.
//   - the error of the recovery log, if an append or a compaction failed.
//
// In every case, every goroutine the Pipeline started has ended, and Done
// is closed. Run refuses to start, with an error wrapping ErrInvalidConfig,
// if the graph is invalid (see Validate) or ctx is nil — the Pipeline then
// stays unstarted, so the graph may be fixed and Run called again — or if
// p is nil. It returns ErrClosed if the Pipeline already ran.
func (p *Pipeline) Run(ctx context.Context) error {
	if p == nil {
		return errNilPipeline("Run")
	}
	if ctx == nil {
		return fmt.Errorf("%w: Run: ctx is nil: pass a context, such as the one signal.NotifyContext returns", ErrInvalidConfig)
	}
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
		close(p.finished)
		close(p.done)
		p.mu.Unlock()
		return nil
	}
	// The Run's own context keeps ctx's values but not its cancellation,
	// which drains instead; it is cancelled, with a cause, to stop now
	// (errStopped) or on the first failure (see engine.fail). Outputs and
	// receivers see it marked as this pipeline's (see Drain), carrying
	// the ancestors of the shards its sources lease (see shardAncestors), and
	// a random name of this Run, by which outputs without a recovery log
	// tell its batches from an earlier Run's of the same times (see
	// HasRecovery).
	runCtx, cancel := context.WithCancelCause(runname.With(lineage.With(context.WithValue(context.WithoutCancel(ctx), pipelineKey{}, p), p.shardAncestors)))
	defer cancel(nil)
	runCtx = runname.WithEnd(runCtx) // its end, for outputs given a shorter context
	e := newEngine(p, cancel)
	p.state, p.cancel, p.eng = running, cancel, e
	p.mu.Unlock()
	if len(e.bus.listeners) > 0 {
		go e.bus.run() // owned by Run: e.bus.close waits for it
	}

	ran := make(chan struct{}) // closed when the engine has returned
	var watcher sync.WaitGroup
	watcher.Go(func() { p.drainOnDone(ctx, ran) })
	err := e.run(runCtx, p.drainc)
	close(ran)
	watcher.Wait()

	p.mu.Lock()
	p.state, p.eng = closed, nil
	cause := context.Cause(runCtx)
	p.mu.Unlock()
	cancel(nil) // anything still watching the Run's context ends with it
	close(p.finished)
	// Listener events still queued are delivered before Done: a Listener
	// that waits for Drain is released by finished, above.
	e.bus.close(e.cfg.DrainTimeout)
	close(p.done)

	if cause != nil && !errors.Is(cause, errStopped) {
		// A failure, or a drain that outlasted its bound; err, if any, is
		// from closing the recovery log afterwards.
		return errors.Join(cause, err)
	}
	return err
}
