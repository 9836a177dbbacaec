// Package shardstate stores per-shard state snapshots that every worker
// reads: the state a stateful operator keeps for one input shard, with the
// shard position it reflects, fenced by the lease counter of the worker that
// wrote it. DESIGN.md ("Per-shard state") describes the layout and the
// fencing rule.
package shardstate
