//go:build !unix

package localaws

import (
	"errors"
	"os"
	"testing"
)

// checkGone fails t unless p's process has exited: Kill on a reaped process
// reports os.ErrProcessDone.
func checkGone(t *testing.T, p *process) {
	t.Helper()
	if err := p.proc.Kill(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill %s (pid %d) after Close: got %v, want os.ErrProcessDone", p.name, p.pid, err)
	}
}
