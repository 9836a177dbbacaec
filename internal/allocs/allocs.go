// Package allocs measures the heap a function allocates, for the tests
// that bound the memory a decoder takes by the bytes it is given.
package allocs

import "runtime"

// Bytes returns how many bytes of heap f allocates: the growth of
// runtime.MemStats.TotalAlloc while it runs, which also counts what other
// goroutines allocate meanwhile. Each call stops the world twice.
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
