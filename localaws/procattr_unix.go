//go:build unix && !linux

package localaws

import "syscall"

// sysProcAttr puts a server in a process group of its own, so stop can
// signal everything it spawned. Only Linux has a parent-death signal; here
// stdinWatch ends a server whose Go process died.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
