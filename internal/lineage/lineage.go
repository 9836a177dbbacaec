// Package lineage carries, in the context a pipeline gives its outputs,
// the ancestors of the source shards its worker reads (their parents, the
// parents' parents, and so on, as the leases and the shard list name
// them), so that sink/dynamodb can refuse a late write of an ancestor
// shard over an item a descendant wrote (DESIGN.md, "Exactly-once
// outputs").
package lineage

import "context"

// MaxAncestors bounds the ancestors a write names of its shard: the
// nearest first, parents, then grandparents, and so on. Each costs its
// shard prefix (some 50 bytes for a stream name of 20 characters) in the
// version every write of the shard carries, which DynamoDB stores and
// bills with the item; 32 name every ancestor of a shard that went through
// four merges of halving, and at most 8.5 KB with names of the longest
// Kinesis allows, far below an item's 400 KB.
const MaxAncestors = 32

// Func returns the ancestor shard IDs of the shards of stream that the
// worker holds leases on, by shard ID, each shard's nearest first (its
// parents first), each once, at most MaxAncestors; a shard without parents
// or without a lease held may be left out. Each call may walk every lease
// held, so a caller looks a batch's streams up once, not each shard. It
// must be safe for concurrent use.
type Func func(stream string) map[string][]string

type key struct{}

// With returns a copy of ctx that carries f.
func With(ctx context.Context, f Func) context.Context {
	return context.WithValue(ctx, key{}, f)
}

// Ancestors returns the ancestor shard IDs of the shards of stream, by
// shard ID, by the Func ctx carries, nil if it carries none.
func Ancestors(ctx context.Context, stream string) map[string][]string {
	f, _ := ctx.Value(key{}).(Func)
	if f == nil {
		return nil
	}
	return f(stream)
}
