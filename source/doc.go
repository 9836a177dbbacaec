// Package source defines how records enter weir: the Receiver contract every
// source implements, the Runtime the driver gives it (where to push blocks,
// its share of the memory budget, where a restarted reader resumes), and the
// BlockGenerator that turns records into blocks that remember the sequence
// ranges they came from. The block store is the driver's (package stream).
//
// A source never imports package stream: it is a Receiver[T], and
// stream.From(p, r) turns it into a *stream.Stream[T]. The package's Example
// writes one; package source/memory is a small one to read, and
// source/kinesis weir's Kinesis receiver.
package source
