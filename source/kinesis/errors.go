package kinesis

import (
	"errors"
	"fmt"

	"github.com/weirstream/weir/batch"
)

// ErrStreamNotFound is wrapped by the error Start returns when the stream
// does not exist (or the credentials may not see it).
var ErrStreamNotFound = errors.New("kinesis: stream not found")

// errShardRunning is returned by control.StartShard for a shard already
// being read.
var errShardRunning = errors.New("kinesis: shard already being read")

// RangeUnavailableError reports a sequence range Kinesis can no longer
// serve: its records were trimmed (older than the retention period), or the
// shard or stream is gone. Recompute returns it, or with
// Config.SkipUnavailableRanges skips the range and reports it.
type RangeUnavailableError struct {
	// Range is the range, as the block recorded it: its stream, shard, and
	// first and last sequence numbers, both inclusive.
	Range batch.SeqRange
	// Err says why the range is unavailable.
	Err error
}

// Error names the range and the cause.
func (e *RangeUnavailableError) Error() string {
	r := e.Range
	return fmt.Sprintf("kinesis: range %s/%s[%s..%s] is no longer readable: %v", r.Stream, r.Shard, r.First, r.Last, e.Err)
}

// Unwrap returns the cause.
func (e *RangeUnavailableError) Unwrap() error { return e.Err }
