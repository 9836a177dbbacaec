package localaws

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

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
