// Package runname carries, in the contexts a pipeline gives its outputs, a
// name of the Run drawn at random when it starts, so that an output whose
// writes are known by their batch time can name apart the Runs of a
// pipeline without a recovery log, whose batch times may repeat an
// earlier Run's (see sink/kinesis and sink/deadletter/dynamodb), and a
// store tell apart two pipelines' Runs sharing it (sink/deadletter), or,
// with internal/outputid, the outputs of one Run (sink/files).
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
