package recovery

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrShapeChanged is wrapped by the error of a pipeline that restarts with
// a recovery log written by a pipeline of another shape; the message lists
// every difference and says how to start afresh.
var ErrShapeChanged = errors.New("recovery: pipeline shape changed")

// Shape is what a recovery log must agree with to be replayed: the pipeline's
// sources and its output operations, each in declaration order. Block IDs
// name their source by index and batches are replayed through the outputs,
// so a log is only meaningful to a pipeline of the same shape.
type Shape struct {
	// Sources are the pipeline's sources, in the order they were declared
	// (a BlockID's Source is an index into this list).
	Sources []Component `json:"sources"`
	// Outputs are the pipeline's output operations, in the order they were
	// declared.
	Outputs []Component `json:"outputs"`
}

// Component describes one source or output of a pipeline.
type Component struct {
	// Kind is what the component is, for example "kinesis" or "memory" for
	// a source, "ForEachBatch" or "Print" for an output. It must not be empty.
	Kind string `json:"kind"`
	// Name identifies the component among those of its kind: the name
	// given with stream.Named, or a receiver's own (stream.Describer). It
	// may be empty: a Kinesis receiver gives none, since the ranges of its
	// blocks name their stream.
	Name string `json:"name,omitempty"`
}

// String returns c as Kind, or Kind("Name") when it has a name, for example
// ForEachBatch("files").
func (c Component) String() string {
	if c.Name == "" {
		return c.Kind
	}
	return c.Kind + "(" + strconv.Quote(c.Name) + ")"
}

// String returns s as "sources [..] outputs [..]".
func (s Shape) String() string {
	return fmt.Sprintf("sources %v outputs %v", s.Sources, s.Outputs)
}
