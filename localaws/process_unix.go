//go:build unix

package localaws

import (
	"errors"
	"fmt"
	"syscall"
)

// terminate sends SIGTERM to the server's process group.
func (p *process) terminate() error { return signalGroup(p.pid, syscall.SIGTERM) }

// kill sends SIGKILL to the server's process group.
func (p *process) kill() error { return signalGroup(p.pid, syscall.SIGKILL) }

// signalGroup signals the process group led by pid; a group that is already
// gone is not an error. sysProcAttr makes every server the leader of its own
// group, so this reaches anything the server spawned.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("localaws: signal %v to process group %d: %w", sig, pid, err)
}
