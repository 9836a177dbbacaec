// Package panics turns a panic of code weir calls but does not own (a
// user's function or hook, a user-supplied AWS client) into an error, in
// the goroutine that ran it. weir calls such code from goroutines of its
// own, where nothing above could recover a panic: it crashed the process.
// See DESIGN.md, Failure model.
package panics

import (
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// Error is a recovered panic: its value, the stack of the goroutine that
// panicked, and where the panic was raised.
type Error struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack (runtime/debug.Stack).
	Stack []byte
	// Site is where the panic was raised: "<function> (<file>:<line>)",
	// the first frame below the runtime's panic that is not the runtime's;
	// "" if none was found.
	Site string
}

// Error returns "panic: " and the panic's value.
func (e *Error) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Call calls f and returns a panic in it as an *Error.
func Call(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recovered(v)
		}
	}()
	return f()
}

// Call1 is Call for an f that returns a value too: on a panic, the zero
// value and the *Error.
func Call1[R any](f func() (R, error)) (r R, err error) {
	defer func() {
		if v := recover(); v != nil {
			var zero R
			r, err = zero, recovered(v)
		}
	}()
	return f()
}

// Recovered returns the *Error of v, a panic's value, for a deferred
// function that recovered it itself: where the closure Call takes would
// cost an allocation per call on a hot path.
func Recovered(v any) *Error { return recovered(v) }

// recovered makes the *Error of v, a panic's value, recovered by a
// deferred function of Call, Call1 or Recovered's caller.
func recovered(v any) *Error {
	return &Error{Value: v, Stack: debug.Stack(), Site: site()}
}

// site returns where the panic being recovered was raised, called from
// recovered.
func site() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(f.Function, "runtime."):
			return fmt.Sprintf("%s (%s:%d)", f.Function, filepath.Base(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}
