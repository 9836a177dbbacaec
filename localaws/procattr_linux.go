package localaws

import "syscall"

// sysProcAttr puts a server in a process group of its own, so stop can
// signal everything it spawned, and has the kernel kill it when this process
// dies, so a crashed test binary leaves no server behind.
//
// Pdeathsig fires when the forking OS thread exits; the Go runtime only ends
// threads of goroutines that exit while locked to them, which this package
// never does, so in practice it fires when the process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
