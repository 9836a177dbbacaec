package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMainArgs runs the command, as this test binary with
// WEIR_LOCAL_TEST_ARGS set, with a command line it must refuse before
// starting anything: it exits non-zero and names the problem.
func TestMainArgs(t *testing.T) {
	if args := os.Getenv("WEIR_LOCAL_TEST_ARGS"); args != "" {
		os.Args = append([]string{"weir-local"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	for _, tc := range []struct {
		args, want string
	}{
		// A stream given without -stream: nothing would create it.
		{"-kinesis=false -dynamodb=false words:2", `unexpected argument "words:2"`},
		// Nothing to start: the error names the flags, not localaws's fields.
		{"-kinesis=false -dynamodb=false", "-kinesis, -dynamodb and -kinesis-mock are all false"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainArgs$")
		cmd.Env = append(os.Environ(), "WEIR_LOCAL_TEST_ARGS="+tc.args)
		out, err := cmd.CombinedOutput()
		if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) {
			t.Errorf("weir-local %s: %v, want a non-zero exit; output:\n%s", tc.args, err, out)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("weir-local %s printed:\n%s\nwant it to say %s", tc.args, out, tc.want)
		}
	}
}
