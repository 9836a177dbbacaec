package recovery

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrShapeChanged is wrapped by the error CheckShape returns when a pipeline
// restarts with a recovery log written by a pipeline of another shape.
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
	// Name identifies the component among those of its kind: a stream name
	// for a Kinesis source, the name given to an output. It may be empty.
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

func (s Shape) validate() error {
	var problems []error
	for i, c := range s.Sources {
		if c.Kind == "" {
			problems = append(problems, fmt.Errorf("source %d: empty kind", i+1))
		}
	}
	for i, c := range s.Outputs {
		if c.Kind == "" {
			problems = append(problems, fmt.Errorf("output %d: empty kind", i+1))
		}
	}
	return errors.Join(problems...)
}

// CheckShape compares the shape recorded in a log with the shape of the
// pipeline starting now. It returns nil if they are the same, and otherwise
// an error wrapping ErrShapeChanged that lists every difference, counting
// sources and outputs from 1 in declaration order (for example `output 2 was
// ForEachBatch("files"), now Print`), and says how to start afresh.
func CheckShape(recorded, current Shape) error {
	diffs := diffComponents("source", recorded.Sources, current.Sources)
	diffs = append(diffs, diffComponents("output", recorded.Outputs, current.Outputs)...)
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w since the recovery log was written: %s; a log can only be replayed "+
		"by a pipeline with the same sources and outputs in the same order: restore the "+
		"pipeline, or start fresh by deleting the log (its directory, or use a new "+
		"DynamoDB log name), accepting that its pending batches will not be recomputed",
		ErrShapeChanged, strings.Join(diffs, "; "))
}

func diffComponents(what string, was, now []Component) []string {
	var diffs []string
	for i := range max(len(was), len(now)) {
		n := i + 1
		switch {
		case i >= len(now):
			diffs = append(diffs, fmt.Sprintf("%s %d was %v, now missing", what, n, was[i]))
		case i >= len(was):
			diffs = append(diffs, fmt.Sprintf("%s %d is new: %v", what, n, now[i]))
		case was[i] != now[i]:
			diffs = append(diffs, fmt.Sprintf("%s %d was %v, now %v", what, n, was[i], now[i]))
		}
	}
	return diffs
}
