// Package recovery is weir's metadata log and what a restart computes from
// it: the reason weir needs no write-ahead log of the data itself.
//
// The driver appends an Entry to a Log at each step of a record's life
// (the repository's DESIGN.md, "Data flow"):
//
//   - BlockStored, when a block enters the block store and before anything
//     else learns of it (a receiver may then advance its stored sequence
//     numbers);
//   - BatchAllocated, when a batch is cut, before its jobs run;
//   - BatchCompleted, when every output of the batch succeeded;
//   - ShapeRecorded, once, on the first start with a log.
//
// After a crash, Load (Read, then Recover) returns the State a restart
// needs: the batches allocated but not completed, to recompute with exactly
// the same blocks (a block missing from the store is re-read from its
// sequence ranges); the stored but unallocated blocks, for the next batch;
// the last completed batch time; where each source's block numbering and
// each shard's reader resume; and the recorded Shape, which CheckShape
// compares with the restarting pipeline's.
//
// With stateful operators, the driver also stores snapshots of their state
// in the log's SnapshotStore and records each with SnapshotTaken; Recover
// then keeps the batches completed after the current snapshot, with their
// blocks (State.Replay), through compaction, so that a restart rebuilds the
// state exactly from the snapshot and their ranges.
//
// Compact keeps the log short: it replaces the entries with the shortest
// log recovering to the same State (State.Entries), dropping completed
// batches and the blocks only they referenced and keeping a Summary of their
// progress.
//
// # Logs
//
// Three implementations share the Log contract, checked by the conformance
// suite in package recoverytest:
//
//   - Dir (OpenDir): segment files in a local directory, each entry framed
//     with its length and CRC-32C checksums and fsynced before Append
//     returns, the directory locked against a second writer. A torn last
//     entry left by a crash is dropped on open; any other damage stops the
//     open with a *CorruptError naming the file and offset.
//   - package dynamolog: one item per entry in a DynamoDB table, so that a
//     worker restarted on another machine recovers exactly what its
//     predecessor logged, written with conditional puts so that a writer
//     displaced by a newer one is fenced off (ErrFenced).
//   - Memory: in memory, with fault injection, for tests.
//
// Each is opened through an Opener (DirConfig, dynamolog.Config, *MemoryStore),
// which a driver's configuration can hold.
//
// # Encoding
//
// An entry is stored as one line of JSON carrying a version and a kind tag,
// for example {"v":1,"kind":"complete","time":1700000000000}; see
// EncodeEntry. A log written by another version is refused, not misread.
package recovery
