package lease

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// TestLatestPinOnServerClock takes a lease at LATEST with a worker whose
// clock is an hour ahead of, or years behind (newWorker's clock, in 2023),
// the clock of dynalite (this machine's, as Kinesis's would be AWS's): the
// pin (Lease.LatestAt) must be LatestMargin before the take on the earlier
// of the two clocks (dynalite's to within its Date header's staleness),
// and the skew said at WARN. A pin an hour ahead lies in Kinesis's future,
// where it refuses an iterator and, once the time has come, skips what was
// put since the take. One on the clock behind is early, which delivers
// records put before the take but loses none: a test's fake Kinesis on a
// virtual clock, with a real lease table, keeps working.
func TestLatestPinOnServerClock(t *testing.T) {
	tests := []struct {
		name  string
		ahead bool // else the worker's clock is left in 2023
		says  string
	}{
		{"ahead", true, "runs ahead of DynamoDB's by about 1h0m"},
		{"behind", false, "runs behind DynamoDB's"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			var logs bytes.Buffer
			w := newWorker(t, localaws.UniqueName(t), "w1", servers.Env(t).DynamoDB(), func(c *CoordinatorConfig) {
				c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			})
			if tc.ahead {
				w.clk.Set(time.Now().Add(time.Hour))
			}
			if err := w.c.SyncShards(ctx, shardIDs(1)); err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			w.cycle(ctx)
			after := time.Now()
			held := w.c.Held()
			if len(held) != 1 || held[0].Checkpoint != checkpointer.LatestPosition {
				t.Fatalf("held %+v, want the one lease, at LATEST", held)
			}
			// The Date of an answer is whole seconds, rounded down, and
			// dynalite's (Node's, cached for a second) may be late by more
			// when its loop is busy: the pin may be that much earlier,
			// never later.
			lo, hi := before.Add(-LatestMargin-10*time.Second), after.Add(-LatestMargin)
			if !tc.ahead {
				lo = w.clk.Now().Add(-LatestMargin)
				hi = lo
			}
			if pin := held[0].LatestAt; pin.Before(lo) || pin.After(hi) {
				t.Errorf("pinned at %v, want within [%v, %v]: LatestMargin before the take on the earlier clock",
					pin.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
			}
			if got := logs.String(); strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, tc.says) || !strings.Contains(got, "NTP") {
				t.Errorf("logged %q, want one WARN saying the clock %s and the fix", got, tc.says)
			}
		})
	}
}
