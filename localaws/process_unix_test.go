//go:build unix

package localaws

import (
	"errors"
	"syscall"
	"testing"
)

// checkGone fails t unless p's process no longer exists, as signal 0 tells.
func checkGone(t *testing.T, p *process) {
	t.Helper()
	if err := syscall.Kill(p.pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("signal 0 to %s (pid %d) after Close: got %v, want ESRCH", p.name, p.pid, err)
	}
}
