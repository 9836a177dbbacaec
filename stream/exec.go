package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weirstream/weir/internal/panics"
)

// panicError is a panic of user code, recovered in the goroutine that ran
// it: it fails the batch instead of the process. runJob copies its value
// and stack into the *BatchError.
type panicError = panics.Error

// safely calls f and turns a panic in it into a *panicError.
func safely(f func() error) error { return panics.Call(f) }

// receiverCall calls f, a receiver's method (Start or Stop, named what),
// and turns a panic in it into an error naming the method, the panic's
// value and its stack: the driver calls them in goroutines of its own,
// where a panic (a source's decoder on a poison record) crashed the
// process.
func receiverCall(what string, f func() error) error {
	err := safely(f)
	if pe, ok := err.(*panicError); ok {
		return fmt.Errorf("the receiver's %s panicked: %v\n%s", what, pe.Value, pe.Stack)
	}
	return err
}

// parallel runs task(ctx, i) for every i in [0, n), at most par at a time:
// the calling goroutine runs tasks too, and par-1 goroutines at most help
// it, all of them waited for before parallel returns. Tasks are started in
// index order. The ctx given to the tasks is cancelled when one fails, so
// the others can stop early; tasks not started by then are skipped. A panic
// in a task is recovered and fails it with a *panicError.
//
// parallel returns the first error of a task, or, if ctx was done before
// every task ran, the cause of ctx: a batch whose tasks did not all run
// must not complete.
func parallel(ctx context.Context, par, n int, task func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	if n == 1 || par <= 1 {
		// One goroutine: no cancellation context or hand-off to pay for.
		for i := range n {
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
			if err := safely(func() error { return task(ctx, i) }); err != nil {
				return err
			}
		}
		return nil
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		once       sync.Once
		first      error
	)
	work := func() {
		for tctx.Err() == nil {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			if err := safely(func() error { return task(tctx, i) }); err != nil {
				once.Do(func() { first = err })
				cancel()
				return
			}
			done.Add(1)
		}
	}
	var wg sync.WaitGroup
	for range min(par, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	if first != nil {
		return first
	}
	if int(done.Load()) < n {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		// Neither an error nor a cancellation: a task's goroutine ended
		// without returning, which only runtime.Goexit does.
		return errTaskExited
	}
	return nil
}

// errTaskExited fails a batch one of whose tasks called runtime.Goexit (as
// testing.T.FailNow does) in user code: the task's partition was not done.
// If it was the batch runner's own goroutine that ended, the Run fails with
// it (see runGraph).
var errTaskExited = errors.New("stream: a task ended without returning: runtime.Goexit in a user function")
