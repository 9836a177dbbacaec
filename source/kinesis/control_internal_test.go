package kinesis

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// assignerFunc adapts a function to the assigner interface, for tests that
// start and stop shard readers themselves.
type assignerFunc func(ctx context.Context, c *control) error

func (f assignerFunc) assign(ctx context.Context, c *control) error { return f(ctx, c) }

// TestAllShardsStartAfterTheLog checks where allShards starts a shard
// without leases: after Runtime.ResumeAfter's answer, when it is a sequence
// number, and otherwise at the initial position.
func TestAllShardsStartAfterTheLog(t *testing.T) {
	closed := shardInfo{ID: "shard-1", StartingSeq: "1", EndingSeq: "900"}
	open := shardInfo{ID: "shard-1", StartingSeq: "1"}
	tests := []struct {
		name    string
		shard   shardInfo
		initial InitialPosition
		logged  string // Runtime.ResumeAfter's answer; "" means none
		first   bool   // listed at start
		want    shardPlan
	}{
		{"nothing known", open, TrimHorizon, "", true, shardPlan{pos: position{Initial: TrimHorizon}}},
		{"log only", open, TrimHorizon, "100", true, shardPlan{pos: position{After: "100"}}},
		{"log beats the initial position", open, Latest, "100", true, shardPlan{pos: position{After: "100"}}},
		{"log reads a closed shard at LATEST", closed, Latest, "100", true, shardPlan{pos: position{After: "100"}}},
		{"closed shard at LATEST, nothing known", closed, Latest, "", true, shardPlan{pos: position{Initial: Latest}, skip: true}},
		{"log beats a new shard's trim horizon", open, Latest, "100", false, shardPlan{pos: position{After: "100"}}},
		{"new shard, nothing known", open, Latest, "", false, shardPlan{pos: position{Initial: TrimHorizon}}},
		{"log not a sequence number", open, TrimHorizon, "LATEST", true, shardPlan{pos: position{Initial: TrimHorizon}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Stream: "s", InitialPosition: tc.initial}
			rn := &run{cfg: cfg, resumeAfter: func(stream, shard string) (string, bool) {
				if stream != "s" || shard != "shard-1" {
					t.Errorf("ResumeAfter(%q, %q), want (s, shard-1)", stream, shard)
				}
				return tc.logged, tc.logged != ""
			}}
			s := &shardSync{c: &control{run: rn}, known: map[string]shardPlan{}}
			got := s.plan(tc.shard, tc.first)
			tc.want.shard = tc.shard
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(shardPlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
