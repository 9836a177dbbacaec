package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrDrainTimeout is wrapped by the *DrainError Run returns when the drain
// its ctx started outlasted Config.DrainTimeout.
var ErrDrainTimeout = errors.New("stream: drain timeout")

// errStopped is the cause of the Run's context when the pipeline was told
// to stop: a requested shutdown, not a failure.
var errStopped = errors.New("stream: stopped")

// pipelineKey marks the contexts a Pipeline gives its outputs and receivers
// with the Pipeline, so that Drain knows it is called from inside.
type pipelineKey struct{}

// DrainError reports a drain that did not finish within its bound, and what
// was left: the pipeline then stopped now, as Stop does. Nothing it counts
// is lost: blocks never completed are read again after a restart (and,
// with a recovery log, recomputed). It is returned by Drain when its ctx
// expired, and by Run for such a drain or one that outlasted
// Config.DrainTimeout.
type DrainError struct {
	// Batches is the number of batches cut and not completed: queued, or
	// running when the drain gave up.
	Batches int
	// Blocks and Records count the blocks stored and not completed, of
	// every source, and the records in them.
	Blocks, Records int
	// Receivers are the sources (indexes, in From call order) whose
	// receiver's Start had not returned.
	Receivers []int
	// Err is why the drain gave up: ErrDrainTimeout, or the cause of the
	// ctx given to Drain (such as context.DeadlineExceeded).
	Err error
}

// Error returns "stream: drain gave up (<cause>): 2 batches, 5 blocks (120
// records) not completed; receivers of sources [0] not stopped".
func (e *DrainError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "stream: drain gave up (%v): %d batches, %d blocks (%d records) not completed",
		e.Err, e.Batches, e.Blocks, e.Records)
	if len(e.Receivers) > 0 {
		fmt.Fprintf(&sb, "; receivers of sources %v not stopped", e.Receivers)
	}
	return sb.String()
}

// Unwrap returns why the drain gave up.
func (e *DrainError) Unwrap() error { return e.Err }

// Stop stops the pipeline now and returns at once, without waiting: Run
// cancels the receivers (their Start and any Stop in progress) and the
// batch running, drops the batches pending and returns nil once every
// goroutine has ended; wait for that with Done. Blocks stored but not
// completed are not reported as completed, so their records are read again
// after a restart. Called before Run, it makes Run return nil at once.
//
// Stop is idempotent and safe to call from any goroutine, including from an
// output or a Listener. On a nil Pipeline it does nothing.
func (p *Pipeline) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.state == running {
		p.cancel(errStopped)
	}
}

// Drain stops the pipeline gracefully and waits for it, bounded by ctx:
// it asks every receiver to stop (each pushes what it holds and, for
// Kinesis, hands its shards back), then keeps cutting and running batches,
// at their usual batch times, until every stored block has been processed;
// with Config.Recovery and stateful operators it then snapshots their
// state, so that a restart replays no batch (see
// Config.StateSnapshotInterval). It returns nil once Run has finished (and
// Done is closed).
//
// A drain ends at the last batch time it needed, not at a window's: a
// window (Window, ReduceByKeyAndWindow) whose time, a multiple of its
// slide, is after that batch is not output by the Run, neither early nor
// by waiting for its time. With Config.Recovery its batches are in the
// drain's snapshot, so a restart that runs that time (one started before
// it: a restart's batches start at the clock) outputs the window whole,
// with the records of both Runs; one started after it does not output it,
// as no batch runs at a time that passed while the pipeline was down, and
// the window's records are only in the later windows whose length still
// covers their batches. With state per shard on a fleet, the shards' new
// owners run the window's time. Without Config.Recovery a restart's first
// windows hold only its own batches. This is Spark Streaming's graceful
// stop: a Kinesis stream has no end of input at which to close a window.
// The drain logs each window it leaves open with batches of records, with
// the window's time: at INFO with Config.Recovery, at WARN without.
//
// If ctx is done
// first, Drain stops the pipeline now, as Stop does, and returns at once a
// *DrainError that says what was left and wraps ctx's cause; Run returns
// that error too. The receivers' Stop is given the Run's context, which is
// cancelled then, so a receiver stuck in Stop (a hung DynamoDB call) is
// released too.
//
// A nil ctx, or a nil Pipeline, is refused, with an error wrapping
// ErrInvalidConfig, and requests nothing. Called before Run, Drain returns nil at once and Run
// drains as soon as it has started the receivers; called after Run, it
// returns nil at once.
//
// Drain is idempotent and safe to call from any goroutine. Called from
// inside the pipeline, with a ctx it gave (an output's ctx, or one derived
// from it), Drain cannot wait, since the pipeline waits for its caller: it
// requests the drain and returns nil at once; Run returns when the drain
// is done. A Listener may call Drain with any ctx and wait: listener events
// are delivered on a goroutine of their own, which the drain does not need.
func (p *Pipeline) Drain(ctx context.Context) error {
	if p == nil {
		return errNilPipeline("Drain")
	}
	if ctx == nil {
		return fmt.Errorf("%w: Drain: ctx is nil: pass a context bounding the drain, such as one from context.WithTimeout", ErrInvalidConfig)
	}
	p.mu.Lock()
	p.requestDrainLocked()
	state := p.state
	p.mu.Unlock()
	if state != running || ctx.Value(pipelineKey{}) == p {
		return nil
	}
	select {
	case <-p.finished:
		return nil
	case <-ctx.Done():
	}
	return p.giveUp(context.Cause(ctx))
}

// Done returns a channel that Run closes once it is about to return and
// every goroutine the Pipeline started has ended. It is never closed if Run
// is never called, or refused to start; a nil Pipeline's is nil.
func (p *Pipeline) Done() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.done
}

// requestDrainLocked starts the drain, once; p.mu is held.
func (p *Pipeline) requestDrainLocked() {
	if !p.draining {
		p.draining = true
		close(p.drainc)
	}
}

// drainOnDone drains when ctx, Run's context, is done, and stops the Run
// now, with a *DrainError, if the drain outlasts Config.DrainTimeout. It
// returns when ran is closed.
func (p *Pipeline) drainOnDone(ctx context.Context, ran <-chan struct{}) {
	select {
	case <-ran:
		return
	case <-ctx.Done():
	}
	p.cfg.Logger.Info("stream: Run's context is done: draining", "bound", p.cfg.DrainTimeout)
	p.mu.Lock()
	p.requestDrainLocked()
	p.mu.Unlock()
	t := p.cfg.Clock.NewTimer(p.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-ran:
	case <-t.C():
		p.giveUp(fmt.Errorf("%w: %v", ErrDrainTimeout, p.cfg.DrainTimeout))
	}
}

// giveUp stops a running drain now and returns what was left; nil if Run
// had finished already.
func (p *Pipeline) giveUp(why error) error {
	p.mu.Lock()
	if p.state != running {
		p.mu.Unlock()
		return nil
	}
	err := p.eng.left(why)
	p.cancel(err)
	p.mu.Unlock()
	p.cfg.Logger.Warn("stream: drain gave up: stopping now", "err", err)
	return err
}
