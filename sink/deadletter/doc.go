// Package deadletter keeps the records a pipeline's outputs quarantine
// (stream.Quarantine) in a local directory: one file per batch and output,
// written atomically and durably before the batch completes, so a batch
// recomputed after a crash writes the same file again instead of adding
// letters.
//
//	dead, err := deadletter.Open("dead-letters")
//	defer dead.Close()
//	stream.ForEach(events, send, stream.Quarantine(dead))
//
// Letters lists what a directory holds. See DESIGN.md's Failure model in
// the repository for what is quarantined and what is not.
package deadletter
