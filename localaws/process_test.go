package localaws

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestCloseStopsServers checks that Close ends the processes and is idempotent.
func TestCloseStopsServers(t *testing.T) {
	t.Parallel()
	env, err := Start(t.Context(), Options{Kinesis: true, DynamoDB: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(env.procs) != 2 {
		t.Fatalf("started %d processes, want 2", len(env.procs))
	}
	if err := errors.Join(env.Close(), env.Close()); err != nil {
		t.Fatal(err)
	}
	for _, p := range env.procs {
		select {
		case <-p.done:
		default:
			t.Errorf("%s (pid %d) still running after Close", p.name, p.pid)
		}
		checkGone(t, p)
	}
}

// installedNode returns the node binary and the folder of the installed
// servers, installing them if needed.
func installedNode(t *testing.T) (node, root string) {
	t.Helper()
	root, err := findRoot(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	node, err = lookNode("node")
	if err != nil {
		t.Fatal(err)
	}
	if err := ensureInstalled(t.Context(), root, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	return node, root
}

// TestPortTakenByAnotherProcess starts each kind of launcher on a port that
// something else already listens on: the start must fail with errPortInUse
// (so startServer retries on another port), not take the other listener for
// the server being ready.
func TestPortTakenByAnotherProcess(t *testing.T) {
	t.Parallel()
	node, root := installedNode(t)
	for _, k := range []kind{kindKinesis, kindKinesisMock} {
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			l, err := k.launch(node, root, "", taken.Addr().(*net.TCPAddr).Port)
			if err != nil {
				t.Fatal(err)
			}
			p, err := startProcess(t.Context(), l, slog.New(slog.DiscardHandler))
			if err == nil {
				_ = p.stop()
				t.Fatalf("start on a taken port succeeded")
			}
			if !errors.Is(err, errPortInUse) {
				t.Errorf("start on a taken port: got %v, want errPortInUse", err)
			}
		})
	}
}

// TestStdinWatch checks that a launcher ends when its stdin closes, which is
// how a server notices, on every platform, that the Go process that started
// it died.
func TestStdinWatch(t *testing.T) {
	t.Parallel()
	node, err := lookNode("node")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, "-e", stdinWatch+"setInterval(() => {}, 1000); console.log('up');")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !bufio.NewScanner(out).Scan() {
		_ = cmd.Process.Kill()
		t.Fatalf("node printed nothing: %v", cmd.Wait())
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("node exited with %v after stdin closed, want status 0", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Errorf("node still running 10s after its stdin closed")
	}
}
