package localaws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// readyMarker is printed on stdout by the Node launcher once the server listens.
	readyMarker = "localaws-ready"
	// portInUseExit is the exit status of the Node launcher when its port is taken.
	portInUseExit = 98
	// stopGrace is how long a server gets to exit after terminate before kill.
	stopGrace = 3 * time.Second
	// mockGrace replaces stopGrace for an in-memory kinesis-mock, which has
	// nothing to save yet waits for open client connections before exiting.
	mockGrace = 100 * time.Millisecond
	// startTimeout bounds one start attempt when ctx has no earlier deadline.
	startTimeout = 60 * time.Second
	// outputLimit is how many trailing bytes of a server's output are kept for errors.
	outputLimit = 16 << 10
)

// errPortInUse reports that a server could not bind its port; the start is retried.
var errPortInUse = errors.New("port already in use")

// launch describes how to run one server process.
type launch struct {
	name  string        // "kinesalite", "dynalite", "kinesis-mock"
	node  string        // path of the node binary
	args  []string      // arguments after node
	env   []string      // added to the allow-listed environment (childEnv)
	dir   string        // working directory
	port  int           // the plain HTTP port it serves on 127.0.0.1
	grace time.Duration // time between terminate and kill on stop
}

// process is one running server started by this package. Its wait goroutine is
// owned by the process and always ends: stop waits for it.
type process struct {
	name     string
	pid      int
	proc     *os.Process // to kill it where there are no process groups
	grace    time.Duration
	logger   *slog.Logger
	out      *tailBuffer
	done     chan struct{} // closed when the process has exited and its output is drained
	waitErr  error         // valid after done is closed
	serving  atomic.Bool   // it printed readyMarker: an exit from now on is news
	stopping atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// startProcess runs l and waits until it serves, the process exits or ctx ends.
func startProcess(ctx context.Context, l launch, logger *slog.Logger) (*process, error) {
	out := &tailBuffer{limit: outputLimit, marker: []byte(readyMarker), ready: make(chan struct{})}
	cmd := exec.Command(l.node, l.args...)
	cmd.Dir = l.dir
	cmd.Env = append(childEnv(os.Environ(), false), l.env...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = stopGrace
	cmd.SysProcAttr = sysProcAttr()
	// The write end of stdin stays open in this process until Wait returns
	// (exec closes it then) or this process dies: stdinWatch ends the server
	// when it closes. cmd, which holds it, lives as long as the wait goroutine.
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("localaws: start %s: %w", l.name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("localaws: start %s: %w", l.name, err)
	}
	p := &process{name: l.name, pid: cmd.Process.Pid, proc: cmd.Process, grace: l.grace, logger: logger, out: out, done: make(chan struct{})}
	go p.wait(cmd)

	if err := p.waitReady(ctx, out.ready); err != nil {
		return nil, errors.Join(fmt.Errorf("localaws: start %s on 127.0.0.1:%d: %w", l.name, l.port, err), p.stop())
	}
	p.serving.Store(true)
	return p, nil
}

// wait reaps the process and logs an exit nobody asked for: one after the
// server was ready and before stop. An exit during the start is not logged,
// since startProcess returns it as an error.
func (p *process) wait(cmd *exec.Cmd) {
	p.waitErr = cmd.Wait()
	close(p.done)
	if p.serving.Load() && !p.stopping.Load() {
		p.logger.Warn("localaws: server exited unexpectedly", "server", p.name, "pid", p.pid,
			"err", p.waitErr, "output", p.out.String())
	}
}

// waitReady returns when ready is closed: the launcher prints readyMarker
// once this very process listens on its port. Dialing the port instead would
// be fooled by another process that took the port first.
func (p *process) waitReady(ctx context.Context, ready <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	select {
	case <-ready:
		return nil
	case <-p.done:
		return p.exitError()
	case <-ctx.Done():
		return fmt.Errorf("not ready: %w; output: %s", ctx.Err(), p.out.String())
	}
}

// exitError explains why the process exited before it was ready.
func (p *process) exitError() error {
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) && ee.ExitCode() == portInUseExit {
		return errPortInUse
	}
	if strings.Contains(p.out.String(), "EADDRINUSE") {
		return errPortInUse
	}
	return fmt.Errorf("exited before it was ready (%v); output: %s", p.waitErr, p.out.String())
}

// stop asks the server to exit (terminate: SIGTERM to its process group on
// Unix), then forces it (kill) after its grace, and waits for the process to
// be reaped. It is idempotent.
func (p *process) stop() error {
	p.stopOnce.Do(func() {
		p.stopping.Store(true)
		if err := p.terminate(); err != nil {
			p.stopErr = err
		}
		timer := time.NewTimer(p.grace)
		defer timer.Stop()
		select {
		case <-p.done:
			return
		case <-timer.C:
		}
		p.logger.Debug("localaws: server ignored the request to exit; killing it", "server", p.name, "pid", p.pid)
		if err := p.kill(); err != nil && p.stopErr == nil {
			p.stopErr = err
		}
		<-p.done
	})
	return p.stopErr
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another process
// may take it before the server binds it; callers retry on errPortInUse.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localaws: find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("localaws: find a free port: %w", err)
	}
	return port, nil
}

// tailBuffer keeps the last limit bytes written to it and closes ready the
// first time marker has been seen. It is safe for concurrent use.
type tailBuffer struct {
	mu     sync.Mutex
	limit  int
	buf    []byte
	marker []byte
	ready  chan struct{}
	seen   bool
}

// Write implements io.Writer.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if !b.seen && bytes.Contains(b.buf, b.marker) {
		b.seen = true
		close(b.ready)
	}
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// String returns the kept output, trimmed.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.TrimSpace(b.buf))
}
