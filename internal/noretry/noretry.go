// Package noretry marks the errors of weir's own outputs that no retry can
// fix, such as a configuration refused once the pipeline runs, so that the
// driver (package stream) fails the batch at once, instead of trying the
// output again (with warnings that the same refusal is retried) or
// quarantining its records.
package noretry

import "errors"

// marked is an error Mark marked.
type marked struct{ err error }

func (m marked) Error() string { return m.err.Error() }
func (m marked) Unwrap() error { return m.err }

// Mark returns err marked as one no retry fixes: its text and the errors
// it wraps are err's. Mark(nil) is nil.
func Mark(err error) error {
	if err == nil {
		return nil
	}
	return marked{err}
}

// Is reports whether err, or an error it wraps, was marked by Mark.
func Is(err error) bool {
	_, ok := errors.AsType[marked](err)
	return ok
}
