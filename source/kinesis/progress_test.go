package kinesis

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

func rng(shard, first, last string, n int) batch.SeqRange {
	return batch.SeqRange{Stream: "s", Shard: shard, First: first, Last: last, Count: n}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestProgressDrainsOnlyWhenEndedAndStored(t *testing.T) {
	type step struct {
		do          func(p *progress) []drainEvent
		wantDrained bool
	}
	added := func(r batch.SeqRange) func(p *progress) []drainEvent {
		return func(p *progress) []drainEvent { p.added(r); return nil }
	}
	stored := func(rs ...batch.SeqRange) func(p *progress) []drainEvent {
		return func(p *progress) []drainEvent { return p.stored(rs) }
	}
	ended := func(p *progress) []drainEvent {
		if ev, ok := p.ended("a"); ok {
			return []drainEvent{ev}
		}
		return nil
	}
	tests := []struct {
		name   string
		steps  []step
		events []drainEvent
		latest string
	}{
		{
			name:   "ended with nothing read",
			steps:  []step{{do: ended, wantDrained: true}},
			events: []drainEvent{{shard: "a"}},
		},
		{
			name: "ended before its last block is stored",
			steps: []step{
				{do: added(rng("a", "1", "9", 3))},
				{do: added(rng("a", "10", "20", 2))},
				{do: ended},
				{do: stored(rng("a", "1", "9", 3))},
				{do: stored(rng("b", "1", "100", 1), rng("a", "10", "20", 2)), wantDrained: true},
			},
			events: []drainEvent{{shard: "a", lastSeq: "20"}},
			latest: "20",
		},
		{
			name: "stored before it ended",
			steps: []step{
				{do: added(rng("a", "1", "9", 3))},
				{do: stored(rng("a", "1", "9", 3))},
				{do: ended, wantDrained: true},
				{do: stored(rng("a", "1", "9", 3)), wantDrained: true},
			},
			events: []drainEvent{{shard: "a", lastSeq: "9"}},
			latest: "9",
		},
		{
			name: "numeric not string order",
			steps: []step{
				{do: added(rng("a", "95", "100", 2))},
				{do: ended},
				{do: stored(rng("a", "8", "99", 2))},
				{do: stored(rng("a", "95", "100", 2)), wantDrained: true},
			},
			events: []drainEvent{{shard: "a", lastSeq: "100"}},
			latest: "100",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProgress()
			p.started("a")
			var events []drainEvent
			for i, s := range tt.steps {
				events = append(events, s.do(p)...)
				if got := isClosed(p.drained("a")); got != s.wantDrained {
					t.Errorf("after step %d: drained %v, want %v", i, got, s.wantDrained)
				}
			}
			if diff := cmp.Diff(tt.events, events, cmp.AllowUnexported(drainEvent{})); diff != "" {
				t.Errorf("drain events (-want +got):\n%s", diff)
			}
			got, _ := p.latestStored("a")
			if got != tt.latest {
				t.Errorf("latestStored = %q, want %q", got, tt.latest)
			}
		})
	}
}

func TestProgressRestartAfterDrain(t *testing.T) {
	p := newProgress()
	p.started("a")
	p.ended("a")
	old := p.drained("a")
	if !isClosed(old) {
		t.Fatal("not drained after an empty end")
	}
	p.started("a")
	if isClosed(p.drained("a")) {
		t.Error("a restarted shard is still drained")
	}
	st := p.snapshot()["a"]
	if diff := cmp.Diff(ShardStats{Reading: true}, st); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
}

// TestProgressForgetsShardHandedBackUnread checks, on explicit times, that
// a shard whose lease was handed back before any reader read it is
// forgotten forgetShardAfter after the hand-back, as a shard read is after
// its reader stopped, and not while a reader of it runs again.
func TestProgressForgetsShardHandedBackUnread(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := newProgress()
	p.letGo("unread", t0)
	if ids := p.forget(t0.Add(forgetShardAfter-time.Second), forgetShardAfter); len(ids) != 0 {
		t.Errorf("forgot %v before forgetShardAfter, want none", ids)
	}
	if diff := cmp.Diff([]string{"unread"}, p.forget(t0.Add(forgetShardAfter), forgetShardAfter)); diff != "" {
		t.Errorf("forgot (-want +got):\n%s", diff)
	}
	p.letGo("again", t0)
	p.started("again") // taken back and read
	if ids := p.forget(t0.Add(2*forgetShardAfter), forgetShardAfter); len(ids) != 0 {
		t.Errorf("forgot %v while it is read, want none", ids)
	}
}
