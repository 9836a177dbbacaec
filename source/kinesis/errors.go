package kinesis

import (
	"errors"
	"fmt"
)

// ErrStreamNotFound is wrapped by the error Start returns when the stream
// does not exist (or the credentials may not see it).
var ErrStreamNotFound = errors.New("kinesis: stream not found")

// errShardRunning is returned by control.StartShard for a shard already
// being read.
var errShardRunning = errors.New("kinesis: shard already being read")

// RangeUnavailableError reports a sequence range Kinesis can no longer
// serve: its records were trimmed (older than the retention period), or the
// shard or stream is gone. Recompute returns it, or skips the range and
// reports it, according to Config.OnRangeUnavailable.
type RangeUnavailableError struct {
	// Stream is the stream of the range, as recorded.
	Stream string
	// Shard is the shard of the range.
	Shard string
	// First and Last are the range's sequence numbers, both inclusive.
	First, Last string
	// Err says why the range is unavailable.
	Err error
}

// Error names the range and the cause.
func (e *RangeUnavailableError) Error() string {
	return fmt.Sprintf("kinesis: range %s/%s[%s..%s] is no longer readable: %v", e.Stream, e.Shard, e.First, e.Last, e.Err)
}

// Unwrap returns the cause.
func (e *RangeUnavailableError) Unwrap() error { return e.Err }
