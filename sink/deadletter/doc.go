// Package deadletter keeps the records a pipeline's outputs quarantine
// (stream.Quarantine) in a local directory: one file per batch and output,
// written atomically and durably before the batch completes, so a batch
// recomputed after a crash writes the same file again instead of adding
// letters. Without a recovery log a restart whose wall clock is behind the
// last Run's batches repeats their times: a file of the batch's time and
// output holding other letters makes Quarantine fail with ErrTimeReused
// rather than replace them.
//
//	dead, err := deadletter.Open("dead-letters")
//	defer dead.Close()
//	stream.ForEach(events, send, stream.Quarantine(dead))
//
// Letters lists what a directory holds. See DESIGN.md's Failure model in
// the repository for what is quarantined and what is not.
package deadletter
