package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
)

// profiler writes a CPU profile of each weir run, and only of those, so
// the profiles show what weir's consumer costs: run 1 to path, run n > 1
// to path.n (`go tool pprof` merges several files). With no path it does
// nothing.
type profiler struct {
	path string
	f    *os.File // the profile being written
}

// start starts profiling weir's run number run (from 1).
func (p *profiler) start(run int) error {
	if p.path == "" {
		return nil
	}
	name := p.path
	if run > 1 {
		name += "." + strconv.Itoa(run)
	}
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	p.f = f
	return nil
}

// stop stops profiling and closes the file.
func (p *profiler) stop() error {
	if p.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.f.Close()
	p.f = nil
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	return nil
}
