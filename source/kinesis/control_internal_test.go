package kinesis

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
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

// TestRestartAtLatest checks where a restart without leases starts a
// shard at Latest that the recovery log holds no position of: a minute
// before the previous Run was last seen alive (Runtime.LoggedUntil), or
// before now if that is earlier, less how far the clock runs ahead of
// Kinesis's; a closed one is read too, not skipped.
func TestRestartAtLatest(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	closed := shardInfo{ID: "shard-1", StartingSeq: "1", EndingSeq: "900"}
	open := shardInfo{ID: "shard-1", StartingSeq: "1"}
	tests := []struct {
		name  string
		shard shardInfo
		until time.Time
		ahead time.Duration
		want  shardPlan
	}{
		{"first start", open, time.Time{}, 0, shardPlan{pos: position{Initial: Latest}}},
		{"restart", open, now.Add(-time.Hour), 0, shardPlan{pos: position{Initial: AtTimestamp, Timestamp: now.Add(-time.Hour - time.Minute)}}},
		{"logged ahead of now", open, now.Add(10 * time.Second), 0, shardPlan{pos: position{Initial: AtTimestamp, Timestamp: now.Add(-time.Minute)}}},
		{"clock ahead of Kinesis", open, now.Add(-time.Hour), 2 * time.Minute, shardPlan{pos: position{Initial: AtTimestamp, Timestamp: now.Add(-time.Hour - 3*time.Minute)}}},
		{"closed shard", closed, now.Add(-time.Hour), 0, shardPlan{pos: position{Initial: AtTimestamp, Timestamp: now.Add(-time.Hour - time.Minute)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rn := &run{cfg: Config{Stream: "s", InitialPosition: Latest}, clock: clock.NewManual(now), loggedUntil: tc.until, ahead: tc.ahead,
				resumeAfter: func(string, string) (string, bool) { return "", false }}
			s := &shardSync{c: &control{run: rn}, known: map[string]shardPlan{}}
			got := s.plan(tc.shard, true)
			tc.want.shard = tc.shard
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(shardPlan{})); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// resharded is the listing of a stream resharded: p splits into a and b;
// a splits into a1 and a2; p2 and b merge into m.
var resharded = []shardInfo{
	{ID: "p", EndingSeq: "9"}, {ID: "p2", EndingSeq: "9"},
	{ID: "a", Parent: "p", EndingSeq: "9"}, {ID: "b", Parent: "p", EndingSeq: "9"},
	{ID: "a1", Parent: "a"}, {ID: "a2", Parent: "a"},
	{ID: "m", Parent: "p2", AdjacentParent: "b"},
}

// TestShardSucceeded checks how allShards tells, without the shard's own
// position, that a closed shard was read to its end: a listed descendant
// of it holds a position in the recovery log (at Start, or a record of it
// completed since), through any number of closed shards and merges; a
// descendant the log was told finished holds none.
func TestShardSucceeded(t *testing.T) {
	shards := resharded
	tests := []struct {
		name      string
		logged    []string // positions the log held at Start
		completed []string // shards with a completed record since
		forgotten []string // shards the log was told finished
		want      map[string]bool
	}{
		{"nothing logged", nil, nil, nil, map[string]bool{"p": false, "p2": false, "a": false, "b": false}},
		{"a child logged", []string{"a"}, nil, nil, map[string]bool{"p": true, "p2": false, "a": false, "b": false}},
		{"a grandchild logged", []string{"a2"}, nil, nil, map[string]bool{"p": true, "p2": false, "a": true, "b": false}},
		{"the merge's child logged", []string{"m"}, nil, nil, map[string]bool{"p": true, "p2": true, "a": false, "b": true}},
		{"a child completed since", nil, []string{"b"}, nil, map[string]bool{"p": true, "p2": false, "a": false, "b": false}},
		{"the child logged was forgotten", []string{"a"}, nil, []string{"a"}, map[string]bool{"p": false, "p2": false, "a": false, "b": false}},
		{"the child forgotten, its child completed", []string{"a"}, []string{"a1"}, []string{"a"}, map[string]bool{"p": true, "p2": false, "a": true, "b": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Receiver{progress: newProgress()}
			for _, id := range tc.completed {
				r.progress.completed([]batch.SeqRange{{Shard: id, First: "5", Last: "5"}})
			}
			rn := &run{r: r, cfg: Config{Stream: "s"}, resumeAfter: func(_, shard string) (string, bool) {
				return "5", slices.Contains(tc.logged, shard)
			}}
			s := &shardSync{c: &control{run: rn}, known: map[string]shardPlan{}}
			for _, id := range tc.forgotten {
				s.known[id] = shardPlan{done: true, logged: true, forgotten: true}
			}
			children := childrenOf(shards)
			for id, want := range tc.want {
				if got := s.succeeded(id, children, nil); got != want {
					t.Errorf("succeeded(%s) = %v, want %v", id, got, want)
				}
			}
		})
	}
}

// TestShardParentRead: a shard made by a reshard of a shard read before the
// restart, as the recovery log shows at Start, is read from its start
// whatever InitialPosition says (parentRead).
func TestShardParentRead(t *testing.T) {
	// resharded, and gone (no longer listed) split into g.
	shards := append(slices.Clone(resharded), shardInfo{ID: "g", Parent: "gone"})
	none := map[string]bool{"p": false, "p2": false, "a": false, "b": false, "a1": false, "a2": false, "m": false, "g": false}
	with := func(read ...string) map[string]bool {
		m := maps.Clone(none)
		for _, id := range read {
			m[id] = true
		}
		return m
	}
	tests := []struct {
		name   string
		logged []string // positions the log held at Start
		want   map[string]bool
	}{
		{"nothing logged", nil, none},
		{"the first parent logged", []string{"p"}, with("a", "b", "a1", "a2", "m")},
		{"a sibling logged: the parent forgotten", []string{"a1"}, with("a", "b", "a1", "a2", "m")},
		{"one parent of the merge logged", []string{"p2"}, with("m")},
		{"an unlisted parent logged", []string{"gone"}, with("g")},
		{"a leaf logged", []string{"m"}, with("a", "b", "m", "a1", "a2")},
	}
	byID := make(map[string]shardInfo, len(shards))
	for _, sh := range shards {
		byID[sh.ID] = sh
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rn := &run{r: &Receiver{progress: newProgress()}, cfg: Config{Stream: "s"}, resumeAfter: func(_, shard string) (string, bool) {
				return "5", slices.Contains(tc.logged, shard)
			}}
			s := &shardSync{c: &control{run: rn}, known: map[string]shardPlan{}}
			children := childrenOf(shards)
			for id, want := range tc.want {
				if got := s.parentRead(byID[id], byID, children, nil); got != want {
					t.Errorf("parentRead(%s) = %v, want %v", id, got, want)
				}
			}
		})
	}
}
