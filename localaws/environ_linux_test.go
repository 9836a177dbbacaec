package localaws

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// canary is the value of AWS_SECRET_ACCESS_KEY in the tests below: no
// child may see it.
const canary = "weir-canary-secret"

// TestServerEnvironment starts each server with AWS
// credentials in this process's environment and reads the environment of
// the server processes from /proc: the credentials must not be there.
func TestServerEnvironment(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", canary)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIA-weir-canary")
	node, root := installedNode(t)
	logger := slog.New(slog.DiscardHandler)
	for _, k := range []kind{kindKinesis, kindDynamoDB, kindKinesisMock} {
		t.Run(k.String(), func(t *testing.T) {
			p, _, err := startServer(t.Context(), k, node, root, "", logger)
			if err != nil {
				t.Fatal(err)
			}
			defer p.stop()
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range bytes.Split(raw, []byte{0}) {
				if bytes.Contains(kv, []byte(canary)) || bytes.HasPrefix(kv, []byte("AWS_ACCESS_KEY_ID=")) {
					t.Errorf("%s (pid %d) has %q in its environment", k, p.pid, kv)
				}
			}
			if !bytes.Contains(raw, []byte("PATH=")) {
				t.Errorf("%s (pid %d) has no PATH in its environment", k, p.pid)
			}
		})
	}
}

// TestNPMEnvironment runs npmCI with a stand-in npm that records its
// arguments and environment: no install scripts, no AWS credentials.
func TestNPMEnvironment(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", canary)
	dir := t.TempDir()
	npm := filepath.Join(dir, "npm")
	script := "#!/bin/sh\necho \"$@\" > args\nenv > env\n"
	if err := os.WriteFile(npm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal(err)
	}
	if err := npmCI(t.Context(), npm, dir, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(args), "--ignore-scripts") {
		t.Errorf("npm ran with %q, want --ignore-scripts", args)
	}
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(env)) {
		if strings.Contains(line, canary) {
			t.Errorf("npm has %q in its environment", strings.TrimSpace(line))
		}
	}
}
