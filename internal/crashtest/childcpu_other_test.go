//go:build unix && !linux

package crashtest

import "time"

// serverCPU reports false: only Linux's /proc tells the CPU time of the
// servers while they run.
func serverCPU() (time.Duration, bool) { return 0, false }
