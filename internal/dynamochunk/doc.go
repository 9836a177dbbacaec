// Package dynamochunk holds what stores a value larger than a DynamoDB item
// as chunk items: the chunk size, the split and the checked join, the
// batched writes that delete them, and the (log, seq) table that holds
// them, created on demand and waited for (EnsureTable). The recovery log's
// snapshots (recovery/dynamolog) and the per-shard state store
// (internal/shardstate) use it; DESIGN.md describes both layouts.
package dynamochunk
