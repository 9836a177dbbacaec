// Package runname carries, in the contexts a pipeline gives its outputs, a
// name of the Run drawn at random when it starts, so that an output whose
// writes are known by their batch time can name apart the Runs of a
// pipeline without a recovery log, whose batch times may repeat an
// earlier Run's (see sink/kinesis and sink/deadletter/dynamodb), and a
// store tell apart two pipelines' Runs sharing it (sink/deadletter), or,
// with internal/outputid, the outputs of one Run (sink/files); and the
// Run's end (WithEnd, Ended).
package runname

import (
	"context"
	"crypto/rand"
)

// Len is the length of a Run's name: 16 characters of base32, 80 bits,
// so that no two Runs share one.
const Len = 16

type key struct{}

// With returns a copy of ctx that carries a new random name.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, key{}, rand.Text()[:Len])
}

// Of returns the name ctx carries, "" if it carries none (it is not the
// context of a running pipeline).
func Of(ctx context.Context) string {
	n, _ := ctx.Value(key{}).(string)
	return n
}

type endKey struct{}

// WithEnd returns a copy of ctx, the context of a Run, that carries the
// channel ctx.Done(), closed once the Run ended: an output told it by
// Ended knows when the Run ended even from a context derived from ctx
// that ends sooner (a call's timeout).
func WithEnd(ctx context.Context) context.Context {
	return context.WithValue(ctx, endKey{}, ctx.Done())
}

// Ended returns the channel WithEnd put in ctx, closed once the Run
// ended; nil if it carries none.
func Ended(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(endKey{}).(<-chan struct{})
	return c
}
