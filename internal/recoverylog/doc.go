// Package recoverylog is what weir's driver writes in a recovery log and
// what a restart computes from it: the entries (BlockStored, BatchAllocated,
// BatchCompleted, ...), their encoding (one line of JSON each, with a
// version and a kind tag), Recover and the State it returns, compaction
// (State.Entries) and the framing of state snapshots. Log wraps a
// recovery.Log, which stores only encoded records, with these. MemoryStore
// is an in-memory recovery log with fault injection, for tests.
//
// The formats are those of weir v0.2.0: a log written by it is read. The
// repository's DESIGN.md ("Recovery") describes the log.
package recoverylog
