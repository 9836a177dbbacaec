//go:build unix

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestSecondInterruptStopsAtOnce runs main's signal handling in a child
// process (this test binary) whose drain never ends: the first SIGINT
// starts the drain, the second stops the process at once, with the status
// a shell gives a process that SIGINT killed (130).
func TestSecondInterruptStopsAtOnce(t *testing.T) {
	if os.Getenv("FLEETCOUNT_SIGNAL_CHILD") == "1" {
		ctx, stop := interrupted(os.Stderr, os.Interrupt, syscall.SIGTERM)
		defer stop()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		os.Stdout.WriteString("draining\n")
		select {} // a drain that hangs
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondInterruptStopsAtOnce$")
	cmd.Env = append(os.Environ(), "FLEETCOUNT_SIGNAL_CHILD=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			cmd.Process.Kill()
			t.Fatalf("child printed %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	expect("ready")
	cmd.Process.Signal(os.Interrupt)
	expect("draining")
	cmd.Process.Signal(os.Interrupt)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var exit *exec.ExitError
	select {
	case err = <-exited:
	case <-time.After(time.Minute): // a bound on a condition wait, not a timing assertion
		cmd.Process.Kill()
		<-exited
		t.Fatal("the second SIGINT did not stop the process: it went on draining")
	}
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Errorf("child ended with %v, want exit status 130", err)
	}
}
