package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"
)

// TestRun runs the benchmark program on a small load, so it keeps working:
// both consumers must read every record (each fails the run otherwise) and
// a ratio must be printed. Nothing about speed is asserted.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	o := options{records: 600, size: 50, shards: 2, runs: 1, batch: 50 * time.Millisecond,
		block: 10 * time.Millisecond, poll: 10 * time.Millisecond}
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	if !regexp.MustCompile(`median: plain \d+ records/s, weir \d+ records/s, ratio weir/plain \d+\.\d+`).Match(out.Bytes()) {
		t.Errorf("no median line in output:\n%s", out.String())
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), options{records: 0, size: 1, shards: 1, runs: 1}, new(bytes.Buffer)); err == nil {
		t.Error("run with -records 0 = nil, want an error")
	}
}
