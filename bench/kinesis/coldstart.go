package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// childResult is one child's run, timed by the parent from the moment it
// started the process.
type childResult struct {
	first, done time.Duration // 0 if the line never came
	cpu         time.Duration // the child process's user + system CPU time (rusage)
	stats       childStats
}

// spawn runs a consumer child with p and waits for it to exit.
func spawn(ctx context.Context, p childParams) (childResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return childResult{}, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return childResult{}, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		envChild+"="+string(raw),
		// What a user's environment gives the SDK: a region and
		// credentials (static here: the servers are local), and no
		// instance metadata lookups.
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench",
		"AWS_EC2_METADATA_DISABLED=true", "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if p.Verbose {
		cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return childResult{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return childResult{}, err
	}
	var res childResult
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == lineFirst:
			res.first = time.Since(start)
		case line == lineDone:
			res.done = time.Since(start)
		case strings.HasPrefix(line, lineStats+" "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, lineStats+" ")), &res.stats); err != nil {
				return childResult{}, fmt.Errorf("child stats: %w", err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return childResult{}, fmt.Errorf("%s child: %w; stderr:\n%s", p.Consumer, err, lastLines(stderr.String(), 20))
	}
	res.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return res, nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
