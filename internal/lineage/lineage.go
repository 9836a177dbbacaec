// Package lineage carries, in the context a pipeline gives its outputs,
// the parent shards of the source shards its worker reads, as their leases
// name them, so that sink/dynamodb can refuse a late write of a parent
// shard over an item its child shard wrote (DESIGN.md, "Exactly-once
// outputs").
package lineage

import "context"

// Func returns the parent shard IDs of the shards of stream that the
// worker holds leases on, by shard ID; a shard without parents or without
// a lease held may be left out. Each call may copy every lease held, so a
// caller looks a batch's streams up once, not each shard. It must be safe
// for concurrent use.
type Func func(stream string) map[string][]string

type key struct{}

// With returns a copy of ctx that carries f.
func With(ctx context.Context, f Func) context.Context {
	return context.WithValue(ctx, key{}, f)
}

// Parents returns the parent shard IDs of the shards of stream, by shard
// ID, by the Func ctx carries, nil if it carries none.
func Parents(ctx context.Context, stream string) map[string][]string {
	f, _ := ctx.Value(key{}).(Func)
	if f == nil {
		return nil
	}
	return f(stream)
}
