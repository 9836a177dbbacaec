// Package outputid carries, in the contexts a pipeline gives an output's
// function, the output's index in the pipeline, so that a sink told the
// Run apart by internal/runname also tells its outputs apart: one sink
// given to two outputs of a pipeline would take one's writes for the
// other's, made before. Owner is how sink/files refuses the second output,
// and sink/kinesis the second output writing records without origins;
// Written is how sink/dynamodb refuses an item two outputs write, and
// sink/kinesis a record of an origin two outputs write, in one batch.
package outputid

import (
	"context"
	"sync"

	"github.com/weirstream/weir/internal/runname"
)

type key struct{}

// With returns a copy of ctx that carries output index i.
func With(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, key{}, i)
}

// Of returns the output index ctx carries, and false if it carries none
// (it is not the context of a pipeline's output).
func Of(ctx context.Context) (int, bool) {
	i, ok := ctx.Value(key{}).(int)
	return i, ok
}

// InRun returns the name of the pipeline's Run (internal/runname) and the
// output index ctx carries, and false if it lacks either: it is not the
// context of a pipeline's output, and a sink has nothing to tell apart.
func InRun(ctx context.Context) (run string, out int, ok bool) {
	run = runname.Of(ctx)
	out, ok = Of(ctx)
	return run, out, ok && run != ""
}

// Clash is what Owner.Claim found: the sink is free for the output, or
// another output holds it.
type Clash int

const (
	// None: the output may write with the sink.
	None Clash = iota
	// OtherOutput: another output of the same Run wrote with the sink.
	OtherOutput
	// OtherRun: an output of another Run, still running (another
	// pipeline), wrote with the sink; reported only by a claim that asks
	// for the Run (Claim's exclusive).
	OtherRun
)

// Owner remembers which output of which Run (internal/runname) last wrote
// with a sink, so that the sink can refuse a second output whose writes
// it would take for the first one's. The zero Owner is free. It is safe
// for concurrent use.
type Owner struct {
	mu     sync.Mutex
	run    string
	output int
	done   <-chan struct{} // closed once that Run ended
}

// Claim records the output and Run ctx carries as the sink's writer,
// unless another output holds it: then it returns the clash and that
// output's index, and records nothing. With exclusive, an output of
// another Run holds the sink while that Run runs; without, a new Run
// takes it over. A ctx that is not a pipeline output's (no Run's name or
// output index) claims nothing and clashes with nothing.
func (o *Owner) Claim(ctx context.Context, exclusive bool) (Clash, int) {
	run, out, ok := InRun(ctx)
	if !ok {
		return None, 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.run == run && o.output != out:
		return OtherOutput, o.output
	case exclusive && o.run != "" && o.run != run && !closed(o.done):
		return OtherRun, o.output
	}
	o.run, o.output, o.done = run, out, ctx.Done()
	return None, 0
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
