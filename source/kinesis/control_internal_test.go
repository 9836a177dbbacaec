package kinesis

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAllShardsStartAfterTheLog checks where AllShards starts a shard
// without leases: after the greater of Config.StartAfter's answer and
// Runtime.ResumeAfter's, compared as numbers, as the lease mode does.
func TestAllShardsStartAfterTheLog(t *testing.T) {
	closed := Shard{ID: "shard-1", StartingSeq: "1", EndingSeq: "900"}
	open := Shard{ID: "shard-1", StartingSeq: "1"}
	tests := []struct {
		name       string
		shard      Shard
		initial    InitialPosition
		startAfter string // "" means StartAfter knows none; "-" means StartAfter is not set
		logged     string // Runtime.ResumeAfter's answer; "" means none
		first      bool   // listed at start
		want       shardPlan
	}{
		{"nothing known", open, TrimHorizon, "-", "", true, shardPlan{pos: Position{Initial: TrimHorizon}}},
		{"log only", open, TrimHorizon, "-", "100", true, shardPlan{pos: Position{After: "100"}}},
		{"log beats an unknown checkpoint", open, Latest, "", "100", true, shardPlan{pos: Position{After: "100"}}},
		{"log ahead, compared as numbers", open, TrimHorizon, "99", "100", true, shardPlan{pos: Position{After: "100"}}},
		{"checkpoint ahead, compared as numbers", open, TrimHorizon, "100", "99", true, shardPlan{pos: Position{After: "100"}}},
		{"equal", open, TrimHorizon, "100", "100", true, shardPlan{pos: Position{After: "100"}}},
		{"checkpoint only", open, TrimHorizon, "100", "", true, shardPlan{pos: Position{After: "100"}}},
		{"log reads a closed shard at LATEST", closed, Latest, "-", "100", true, shardPlan{pos: Position{After: "100"}}},
		{"closed shard at LATEST, nothing known", closed, Latest, "-", "", true, shardPlan{pos: Position{Initial: Latest}, skip: true}},
		{"log beats a new shard's trim horizon", open, Latest, "-", "100", false, shardPlan{pos: Position{After: "100"}}},
		{"new shard, nothing known", open, Latest, "-", "", false, shardPlan{pos: Position{Initial: TrimHorizon}}},
		{"log not a sequence number", open, TrimHorizon, "-", "LATEST", true, shardPlan{pos: Position{Initial: TrimHorizon}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Stream: "s", InitialPosition: tc.initial}
			if tc.startAfter != "-" {
				cfg.StartAfter = func(_ context.Context, shard string) (string, bool, error) {
					return tc.startAfter, tc.startAfter != "", nil
				}
			}
			rn := &run{cfg: cfg, resumeAfter: func(stream, shard string) (string, bool) {
				if stream != "s" || shard != "shard-1" {
					t.Errorf("ResumeAfter(%q, %q), want (s, shard-1)", stream, shard)
				}
				return tc.logged, tc.logged != ""
			}}
			s := &shardSync{c: &Control{run: rn}, known: map[string]shardPlan{}}
			got, err := s.plan(t.Context(), tc.shard, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.shard = tc.shard
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(shardPlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckpointWithoutRecoveryLogAndStartAfterError(t *testing.T) {
	boom := errors.New("boom")
	rn := &run{cfg: Config{Stream: "s", StartAfter: func(context.Context, string) (string, bool, error) { return "", false, boom }}}
	if _, _, err := (&Control{run: rn}).Checkpoint(t.Context(), "shard-1"); !errors.Is(err, boom) {
		t.Errorf("Checkpoint with a failing StartAfter: %v, want it wrapped", err)
	}
	rn = &run{cfg: Config{Stream: "s", StartAfter: func(context.Context, string) (string, bool, error) { return "7", true, nil }}}
	seq, ok, err := (&Control{run: rn}).Checkpoint(t.Context(), "shard-1")
	if seq != "7" || !ok || err != nil {
		t.Errorf("Checkpoint without a recovery log = %q, %v, %v; want StartAfter's 7", seq, ok, err)
	}
}
