package dynamodb

import "time"

// SetCallTimeout sets the timeout of each call of s's writes, for tests
// that hold a call silent.
func SetCallTimeout[T any](s *Sink[T], d time.Duration) { s.timeout = d }

// DescribeAttempts is describeAttempts, for tests.
const DescribeAttempts = describeAttempts
