//go:build !unix

package localaws

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// sysProcAttr returns nil: no process group and no parent-death signal here
// (Windows). The servers spawn no processes of their own, so killing the one
// process is enough, and stdinWatch ends a server whose Go process died.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// terminate kills the server at once: Windows has no SIGTERM that Node
// would see, and the servers keep nothing that needs a clean exit.
func (p *process) terminate() error { return p.kill() }

// kill ends the server process; one that has already exited is not an error.
func (p *process) kill() error {
	err := p.proc.Kill()
	if err == nil || errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return fmt.Errorf("localaws: kill %s (pid %d): %w", p.name, p.pid, err)
}
