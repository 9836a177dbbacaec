package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestRun runs the benchmark program on a small load, so it keeps working:
// both consumers must read every record (each fails the run otherwise), a
// ratio must be printed and each weir run profiled. Nothing about speed is
// asserted.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	prof := filepath.Join(t.TempDir(), "weir.prof")
	o := options{records: 600, size: 50, shards: 2, runs: 2, batch: 50 * time.Millisecond,
		block: 10 * time.Millisecond, poll: 10 * time.Millisecond, cpuprof: prof}
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	if !regexp.MustCompile(`median: plain \d+ records/s, weir \d+ records/s, ratio weir/plain \d+\.\d+`).Match(out.Bytes()) {
		t.Errorf("no median line in output:\n%s", out.String())
	}
	for _, p := range []string{prof, prof + ".2"} { // one profile per weir run
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("CPU profile %s: %v, want a non-empty file", p, err)
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), options{records: 0, size: 1, shards: 1, runs: 1}, new(bytes.Buffer)); err == nil {
		t.Error("run with -records 0 = nil, want an error")
	}
}
