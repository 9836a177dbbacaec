package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestRunRefusesBadFlags checks that run refuses counts that would measure
// nothing (it printed medians of 0 runs, NaN ratios) before it starts any
// server.
func TestRunRefusesBadFlags(t *testing.T) {
	for _, o := range []options{
		{runs: 0, shards: 4, warm: time.Second},
		{runs: 1, shards: 0, warm: time.Second},
		{runs: 1, shards: 4, warm: -time.Second},
	} {
		err := run(t.Context(), o, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "must be >= 1") {
			t.Errorf("run(%+v) = %v, want an error naming the bad flag", o, err)
		}
	}
}
