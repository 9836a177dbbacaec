package kinesis

import "time"

// SetCallTimeout sets the timeout of each PutRecords call of s, for tests
// of calls that get no answer.
func SetCallTimeout[T any](s *Sink[T], d time.Duration) { s.timeout = d }
