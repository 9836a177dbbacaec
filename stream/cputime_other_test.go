//go:build !unix

package stream

import "time"

// processCPU returns 0: the CPU time of the process is only read on Unix.
func processCPU() time.Duration { return 0 }
