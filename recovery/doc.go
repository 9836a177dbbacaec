// Package recovery holds the storage of weir's recovery log: the metadata
// log that lets a restarted driver recompute exactly the batches a crash
// interrupted, the reason weir needs no write-ahead log of the data itself
// (the repository's DESIGN.md, "Recovery").
//
// A pipeline is given an Opener (stream.Config.Recovery):
//
//   - DirConfig (Dir): segment files in a local directory, each record
//     framed with its length and CRC-32C checksums and fsynced before Append
//     returns, the directory locked against a second writer (ErrLocked). A
//     torn last record left by a crash is dropped on open; any other damage
//     stops the open with a *CorruptError naming the file and offset.
//   - package dynamolog: one item per record in a DynamoDB table, so that a
//     worker restarted on another machine recovers exactly what its
//     predecessor logged, written with conditional puts so that a writer
//     displaced by a newer one is fenced off (ErrFenced).
//
// The errors a restart may meet are here: ErrLocked, ErrCorrupt
// (*CorruptError), ErrInconsistent, ErrShapeChanged.
//
// A backend implements Log, a list of opaque records that the driver
// encodes, decodes and compacts itself, and SnapshotStore for pipelines
// with stateful operators; package recoverytest is its conformance suite.
package recovery
