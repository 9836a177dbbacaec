package kpl

import (
	"errors"
	"fmt"
)

// ErrDigestMismatch is the kind of a [*FormatError] for a record that starts
// with the magic number but whose trailing MD5 digest does not match its
// protobuf bytes: either a damaged aggregate or a plain record that happens
// to start with the same four bytes.
var ErrDigestMismatch = errors.New("kpl: digest mismatch")

// ErrMalformed is the kind of a [*FormatError] for a record whose digest
// matches but whose protobuf message cannot be decoded or breaks the format:
// truncated fields, invalid wire types, missing required fields or table
// indexes out of range.
var ErrMalformed = errors.New("kpl: malformed aggregate")

// FormatError reports a record that starts with the KPL magic number but is
// not a valid aggregate. [Deaggregate] returns it together with the record
// passed through unchanged. Match its kind with errors.Is against
// [ErrDigestMismatch] or [ErrMalformed].
type FormatError struct {
	// Kind is ErrDigestMismatch or ErrMalformed.
	Kind error
	// Offset is the byte offset, in the Kinesis record's data, at which the
	// problem was found.
	Offset int
	// Reason says what is wrong, for people.
	Reason string
}

// Error returns the kind, the offset and the reason.
func (e *FormatError) Error() string {
	return fmt.Sprintf("%v at byte %d: %s", e.Kind, e.Offset, e.Reason)
}

// Unwrap returns the kind, so that errors.Is(err, ErrMalformed) works.
func (e *FormatError) Unwrap() error { return e.Kind }

// malformed builds an ErrMalformed FormatError. It is the only place that
// formats decoding problems, so every one of them carries an offset.
func malformed(offset int, format string, args ...any) *FormatError {
	return &FormatError{Kind: ErrMalformed, Offset: offset, Reason: fmt.Sprintf(format, args...)}
}
