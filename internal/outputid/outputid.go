// Package outputid carries, in the contexts a pipeline gives an output's
// function, the output's index in the pipeline, so that a sink told the
// Run apart by internal/runname also tells its outputs apart: one sink
// given to two outputs of a pipeline (see sink/files) would take one's
// batch for the other's, written before.
package outputid

import "context"

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
