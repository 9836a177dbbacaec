package source

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/clock"
)

// Defaults for the Runtime fields a driver leaves zero; WithDefaults applies them.
const (
	// DefaultBlockInterval is how often a BlockGenerator seals a block when
	// Runtime.BlockInterval is zero.
	DefaultBlockInterval = 200 * time.Millisecond
	// DefaultMaxBufferedBytes is Runtime.MaxBufferedBytes when it is
	// zero, and the default of the pipeline's memory budget
	// (stream.Config.MaxBufferedBytes): 64 MiB, room for about three 1s
	// batches of 8 shards read at Kinesis's full 2 MB/s each.
	DefaultMaxBufferedBytes = 64 << 20
)

// ErrInvalidRuntime is wrapped by the error Runtime.Validate returns, and so
// by the error BlockGenerator.Run returns for a Runtime it cannot use.
var ErrInvalidRuntime = errors.New("source: invalid runtime")

// WithDefaults returns a copy of rt with every zero field set to its default:
// BlockInterval DefaultBlockInterval, MaxBufferedBytes
// DefaultMaxBufferedBytes, Clock clock.Real, Logger slog.Default(), ReportError and Observe a
// function that ignores its argument. BatchInterval is left as it is: zero
// means the driver does not say, and each receiver picks its own fallback.
// Negative values and a nil Push are left as they are, for Validate to
// report.
func (rt Runtime[T]) WithDefaults() Runtime[T] {
	if rt.BlockInterval == 0 {
		rt.BlockInterval = DefaultBlockInterval
	}
	if rt.MaxBufferedBytes == 0 {
		rt.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	rt.Clock = clock.Or(rt.Clock)
	if rt.Logger == nil {
		rt.Logger = slog.Default()
	}
	if rt.ReportError == nil {
		rt.ReportError = func(error) {}
	}
	if rt.Observe == nil {
		rt.Observe = func(any) {}
	}
	return rt
}

// Validate reports every problem of rt together, wrapped in ErrInvalidRuntime:
// a nil Push, a negative BlockInterval or BatchInterval, a MaxBufferedBytes
// below -1.
// Zero values are valid: they mean the defaults (see WithDefaults).
func (rt Runtime[T]) Validate() error {
	var problems []error
	if rt.Push == nil {
		problems = append(problems, errors.New("Push is nil: the driver must set it to the function that stores blocks"))
	}
	if rt.BlockInterval < 0 {
		problems = append(problems, fmt.Errorf("BlockInterval %v: must be >= 0 (0 means %v)", rt.BlockInterval, DefaultBlockInterval))
	}
	if rt.BatchInterval < 0 {
		problems = append(problems, fmt.Errorf("BatchInterval %v: must be >= 0 (0 means the driver does not say)", rt.BatchInterval))
	}
	if rt.MaxBufferedBytes < -1 {
		problems = append(problems, fmt.Errorf("MaxBufferedBytes %d: must be > 0 bytes, or -1 for no limit (0 means %d)", rt.MaxBufferedBytes, DefaultMaxBufferedBytes))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidRuntime, errors.Join(problems...))
	}
	return nil
}
