// Package source defines how records enter weir: the Receiver contract every
// source implements, the BlockGenerator that turns records into blocks that
// remember the sequence ranges they came from, and the in-process block store.
//
// A source never imports package stream: it is a Receiver[T], and
// stream.From(p, r) turns it into a *stream.Stream[T].
package source
