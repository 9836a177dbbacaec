// Package batch holds weir's leaf types: batch times, block identities, the
// sequence-number ranges a block came from, and the typed Batch that the driver
// hands to operators and outputs.
//
// The package does no I/O and imports nothing else of weir's, so every other
// package (sources, checkpointing, recovery, the driver) can share these types.
package batch
