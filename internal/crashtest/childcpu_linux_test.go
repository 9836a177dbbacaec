package crashtest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// serverCPU returns the CPU time (user and system) the local servers this
// process started (its child processes running node) have used so far, and
// true; BenchmarkRestartRecompute tells from it how busy kinesalite's one
// thread was. It reads /proc, whose times are in ticks of 1/100 s
// (USER_HZ, 100 on every Linux architecture Go runs on).
func serverCPU() (time.Duration, bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, false
	}
	self := strconv.Itoa(os.Getpid())
	var ticks int64
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ... utime stime: comm may hold spaces.
		open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
		if open < 0 || end < open {
			continue
		}
		fields := bytes.Fields(raw[end+1:])
		if string(raw[open+1:end]) != "node" || len(fields) < 13 || string(fields[1]) != self {
			continue
		}
		for _, f := range fields[11:13] {
			n, err := strconv.ParseInt(string(f), 10, 64)
			if err != nil {
				return 0, false
			}
			ticks += n
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond, true
}
