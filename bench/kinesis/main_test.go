package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws"
)

// TestMain lets the test binary serve as the program's consumer children,
// which the throughput and memory modes start with os.Executable.
func TestMain(m *testing.M) {
	if isChild, code := childMain(); isChild {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestRunThroughput runs the throughput mode on a small load, so it keeps
// working: both consumers, each a child process, must read every record
// (the run fails otherwise), a ratio must be printed and each weir child
// profiled. Nothing about speed is asserted.
func TestRunThroughput(t *testing.T) {
	var out bytes.Buffer
	prof := filepath.Join(t.TempDir(), "weir.prof")
	o := options{mode: "throughput", records: 600, size: 50, shards: 2, runs: 2, batch: 50 * time.Millisecond,
		poll: 10 * time.Millisecond, rate: 1, duration: time.Second, cpuprof: prof}
	if err := run(t.Context(), o, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	if !regexp.MustCompile(`median from process start to the last record: plain \d+\.\d+s \(\d+ records/s\), weir \d+\.\d+s \(\d+ records/s\), weir/plain \d+\.\d+`).Match(out.Bytes()) {
		t.Errorf("no median line in output:\n%s", out.String())
	}
	for _, p := range []string{prof, prof + ".2"} { // one profile per weir run
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("CPU profile %s: %v, want a non-empty file", p, err)
		}
	}
}

// TestRunMemory runs the memory mode briefly: the four weir children report
// their peaks.
func TestRunMemory(t *testing.T) {
	var out bytes.Buffer
	o := options{mode: "memory", records: 2000, size: 200, shards: 2, runs: 1, batch: 100 * time.Millisecond, poll: 10 * time.Millisecond, rate: 1, duration: time.Second}
	if err := run(t.Context(), o, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	if got := len(regexp.MustCompile(`weir, .*: budget .*, peak buffered .* MiB, peak heap objects .* MiB, peak RSS .* MiB, \d+ records output`).FindAll(out.Bytes(), -1)); got != 5 {
		t.Errorf("%d weir lines in output, want 5:\n%s", got, out.String())
	}
}

// TestRunLatency runs the latency mode briefly: the four consumers, reading
// at once, report their latencies and read rates. It takes over 10s, so it
// runs only with WEIR_BENCH_LATENCY_TEST=1.
func TestRunLatency(t *testing.T) {
	if os.Getenv("WEIR_BENCH_LATENCY_TEST") != "1" {
		t.Skip("takes over 10s: set WEIR_BENCH_LATENCY_TEST=1 to run it")
	}
	var out bytes.Buffer
	o := options{mode: "latency", records: 1, size: 1, shards: 1, runs: 1, poll: 250 * time.Millisecond, rate: 50, duration: 4 * time.Second}
	if err := run(t.Context(), o, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	if got := len(regexp.MustCompile(`p50 \S+  p99 \S+  max \S+  \(\d+ records\), \d+\.\d+ reads/s per shard`).FindAll(out.Bytes(), -1)); got != 4 {
		t.Errorf("%d latency lines in output, want 4:\n%s", got, out.String())
	}
	o.poll = 100 * time.Millisecond
	if err := run(t.Context(), o, new(bytes.Buffer)); err == nil {
		t.Error("latency run with -poll 100ms = nil, want an error (more than 5 reads/s per shard)")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), options{records: 0, size: 1, shards: 1, runs: 1, rate: 1, duration: 1}, new(bytes.Buffer)); err == nil {
		t.Error("run with -records 0 = nil, want an error")
	}
}

// TestRunNamesBadEndpoint checks that a non-loopback -endpoint is refused
// with an error naming the flag, not only the environment variable it is
// passed through.
func TestRunNamesBadEndpoint(t *testing.T) {
	t.Setenv(localaws.EnvKinesisEndpoint, "") // run sets it; restored after the test
	o := options{mode: "throughput", records: 1, size: 1, shards: 1, runs: 1, rate: 1, duration: time.Second,
		endpoint: "http://example.com:80"}
	err := run(t.Context(), o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `-endpoint "http://example.com:80"`) {
		t.Fatalf("run with -endpoint http://example.com:80: %v, want an error naming -endpoint", err)
	}
}
