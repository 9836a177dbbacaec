package localaws

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
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
		if err := syscall.Kill(p.pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("signal 0 to %s (pid %d) after Close: got %v, want ESRCH", p.name, p.pid, err)
		}
	}
}

// TestServersDieWithParent kills a process that started kinesalite with
// SIGKILL, so it runs no cleanup, and checks that kinesalite dies too.
func TestServersDieWithParent(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperServer$")
	cmd.Env = append(os.Environ(), "LOCALAWS_HELPER_SERVER=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		_ = cmd.Process.Kill()
		t.Fatalf("helper printed no pid: %v, %v", sc.Err(), cmd.Wait())
	}
	pid, err := strconv.Atoi(sc.Text())
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("helper printed %q, want a pid", sc.Text())
	}
	pidfd, err := pidfdOpen(pid)
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer syscall.Close(pidfd)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	exited, err := waitPidfd(pidfd, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !exited {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		t.Errorf("kinesalite (pid %d) still running 10s after its parent was killed", pid)
	}
}

// TestHelperServer is the body of TestServersDieWithParent's process: it
// starts kinesalite, prints its pid and waits to be killed.
func TestHelperServer(t *testing.T) {
	if os.Getenv("LOCALAWS_HELPER_SERVER") == "" {
		return // not a helper process
	}
	env, err := Start(t.Context(), Options{Kinesis: true})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString(strconv.Itoa(env.procs[0].pid) + "\n")
	<-t.Context().Done() // never: the parent kills this process
}

// pidfdOpen returns a pidfd of pid; it becomes readable when pid exits.
func pidfdOpen(pid int) (int, error) {
	const sysPidfdOpen = 434
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// waitPidfd waits up to timeout for the process of pidfd to exit.
func waitPidfd(pidfd int, timeout time.Duration) (bool, error) {
	for {
		var set syscall.FdSet
		set.Bits[pidfd/64] |= 1 << (uint(pidfd) % 64)
		tv := syscall.NsecToTimeval(timeout.Nanoseconds())
		n, err := syscall.Select(pidfd+1, &set, nil, nil, &tv)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return n > 0, err
	}
}

// TestPortTakenByAnotherProcess starts each kind of launcher on a port that
// something else already listens on: the start must fail with errPortInUse
// (so startServer retries on another port), not take the other listener for
// the server being ready.
func TestPortTakenByAnotherProcess(t *testing.T) {
	t.Parallel()
	root, err := findRoot(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	node, err := lookNode("node")
	if err != nil {
		t.Fatal(err)
	}
	if err := ensureInstalled(t.Context(), root, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
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
