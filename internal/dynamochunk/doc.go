// Package dynamochunk holds what stores a value larger than a DynamoDB item
// as chunk items: the chunk size, the split and the checked join, and the
// batched writes that delete them. The recovery log's snapshots
// (recovery/dynamolog) and the per-shard state store (internal/shardstate)
// use it; DESIGN.md describes both layouts.
package dynamochunk
