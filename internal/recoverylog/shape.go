package recoverylog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weirstream/weir/recovery"
)

func validateShape(s recovery.Shape) error {
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
// an error wrapping recovery.ErrShapeChanged that lists every difference, counting
// sources and outputs from 1 in declaration order (for example `output 2 was
// ForEachBatch("files"), now Print`), and says how to start afresh.
func CheckShape(recorded, current recovery.Shape) error {
	diffs := diffComponents("source", recorded.Sources, current.Sources)
	diffs = append(diffs, diffComponents("output", recorded.Outputs, current.Outputs)...)
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w since the recovery log was written: %s; a log can only be replayed "+
		"by a pipeline with the same sources and outputs in the same order: restore the "+
		"pipeline, or start fresh by deleting the log (its directory, or use a new "+
		"DynamoDB log name), accepting that its pending batches will not be recomputed",
		recovery.ErrShapeChanged, strings.Join(diffs, "; "))
}

func diffComponents(what string, was, now []recovery.Component) []string {
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
