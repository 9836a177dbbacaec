// Package lineage carries, in the context a pipeline gives its outputs,
// the parent shards of the source shards its worker reads, as their leases
// name them, so that sink/dynamodb can refuse a late write of a parent
// shard over an item its child shard wrote (DESIGN.md, "Exactly-once
// outputs").
package lineage

import "context"

// Func returns the parent shard IDs of shard of stream, nil if none or
// unknown. It must be safe for concurrent use.
type Func func(stream, shard string) []string

type key struct{}

// With returns a copy of ctx that carries f.
func With(ctx context.Context, f Func) context.Context {
	return context.WithValue(ctx, key{}, f)
}

// Parents returns the parent shard IDs of shard of stream by the Func ctx
// carries, nil if it carries none.
func Parents(ctx context.Context, stream, shard string) []string {
	f, _ := ctx.Value(key{}).(Func)
	if f == nil {
		return nil
	}
	return f(stream, shard)
}
