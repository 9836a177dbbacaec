package kinesis

import "time"

// SetCallTimeout sets the timeout of each PutRecords call of s, for tests
// of calls that get no answer.
func SetCallTimeout[T any](s *Sink[T], d time.Duration) { s.timeout = d }

// Writers returns how many entries the record of the outputs writing
// batches without origins holds for the streams named name, for tests of
// what it keeps.
func Writers(name string) int {
	writersMu.Lock()
	defer writersMu.Unlock()
	n := 0
	for k := range writers {
		if k.stream == name {
			n++
		}
	}
	return n
}
