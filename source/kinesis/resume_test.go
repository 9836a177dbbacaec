package kinesis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/source"
)

// TestLeasePositionAfterAdded checks that a lease taken (back) starts after
// the greatest of its checkpoint, the recovery log's number and the records
// this receiver added to blocks (which reach a batch of this process,
// completed or not yet), compared as numbers.
func TestLeasePositionAfterAdded(t *testing.T) {
	weir := func(seq string) lease.Lease { return lease.Lease{Checkpoint: seq, WeirCheckpoint: seq} }
	tests := []struct {
		name   string
		lease  lease.Lease
		logged string // "" means none
		added  string // "" means none
		want   position
	}{
		{"added ahead of a stale checkpoint", weir("99"), "", "100", position{After: "100"}},
		{"added ahead of the initial position", lease.Lease{Checkpoint: "TRIM_HORIZON"}, "", "7", position{After: "7"}},
		{"added behind the checkpoint", weir("100"), "", "99", position{After: "100"}},
		{"added ahead of the log", weir("5"), "50", "100", position{After: "100"}},
		{"log ahead of added", weir("5"), "100", "50", position{After: "100"}},
		{"added covers a KCL aggregate", lease.Lease{Checkpoint: "100", SubSequence: 2}, "", "100", position{After: "100"}},
		{"added behind a KCL aggregate", lease.Lease{Checkpoint: "100", SubSequence: 2}, "", "99", position{At: "100", AtSubSequence: 2, AtCheckpoint: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Receiver{progress: newProgress()}
			if tc.added != "" {
				r.progress.added(batch.SeqRange{Shard: "shard-1", First: "1", Last: tc.added})
			}
			lr := &leaseRun{
				rn: &run{r: r, cfg: Config{Stream: "s", InitialPosition: TrimHorizon}, resumeAfter: func(string, string) (string, bool) {
					return tc.logged, tc.logged != ""
				}},
				log: slog.New(slog.DiscardHandler),
			}
			tc.lease.Shard = "shard-1"
			if diff := cmp.Diff(tc.want, lr.position(tc.lease)); diff != "" {
				t.Errorf("position (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCompletedThrough checks when a shard read to its end is done: once
// the records up to the greater of what this receiver stored and what the
// recovery log held uncompleted at Start are completed, compared as
// numbers.
func TestCompletedThrough(t *testing.T) {
	tests := []struct {
		name        string
		stored      string // "" means none
		uncompleted string // "" means none
		completed   string // "" means none
		want        bool
	}{
		{"nothing to wait for", "", "", "", true},
		{"stored, not completed", "100", "", "99", false},
		{"stored and completed", "100", "", "100", true},
		{"resumed past the end, the recovered batch not completed", "", "100", "", false},
		{"resumed past the end, the recovered batch completed", "", "100", "100", true},
		{"the log ahead of what was stored", "99", "100", "99", false},
		{"what was stored ahead of the log", "100", "99", "99", false},
		{"both completed, compared as numbers", "99", "100", "1000", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Receiver{progress: newProgress()}
			if tc.completed != "" {
				r.progress.completed([]batch.SeqRange{{Shard: "shard-1", First: "1", Last: tc.completed}})
			}
			rn := &run{r: r, cfg: Config{Stream: "s"}, uncompleted: func(stream, shard string) (string, bool) {
				return tc.uncompleted, stream == "s" && shard == "shard-1" && tc.uncompleted != ""
			}}
			if got := rn.completedThrough("shard-1", tc.stored); got != tc.want {
				t.Errorf("completedThrough = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestShardEndAfterTheRecoveredBlocksOfAForgottenShard checks that a
// closed shard whose blocks the recovery log held uncompleted at Start can
// still end when this worker leases it again after it forgot the shard:
// the driver completed those blocks while another worker held the lease,
// the shard was forgotten forgetShardAfter after this worker's reader
// stopped, and the reader of the lease taken back resumes after the
// recovered blocks and reaches the shard's end having stored nothing.
// Before, the shard waited for ever for a completion it had already seen
// (forgotten with the shard), and its children never started.
func TestShardEndAfterTheRecoveredBlocksOfAForgottenShard(t *testing.T) {
	const parent = "shardId-000000000000"
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1"}) // no call is made: the lease is not held
	r, err := New(Config{Stream: "s", App: "app", Leases: &leasetable.Config{DynamoDB: db}})
	if err != nil {
		t.Fatal(err)
	}
	uncompleted := func(stream, shard string) (string, bool) { return "100", stream == "s" && shard == parent }
	rt := source.Runtime[Record]{Uncompleted: uncompleted}.WithDefaults()
	if err := r.begin(rt); err != nil {
		t.Fatal(err)
	}
	rn := &run{r: r, cfg: r.cfg, clock: clock.Real{}, logger: slog.New(slog.DiscardHandler), uncompleted: uncompleted}
	lr, err := newLeaseRun(t.Context(), rn, rt)
	if err != nil {
		t.Fatal(err)
	}
	r.lease.Store(lr)
	var checks []bool
	r.endChecked = func(shard string, ready bool) {
		if shard == parent {
			checks = append(checks, ready)
		}
	}

	// This worker read the parent, then lost its lease.
	t0 := time.Unix(0, 0)
	r.progress.started(parent)
	r.progress.stopped(parent, t0)
	lr.forget(parent)
	// The driver completes the recovered blocks of the parent.
	r.blocksCompleted(t.Context(), []batch.BlockInfo{{Ranges: []batch.SeqRange{{Stream: "s", Shard: parent, First: "1", Last: "100", Count: 2}}}})
	r.forgetShards(t0.Add(forgetShardAfter))
	if _, ok := r.Stats().Shards[parent]; ok {
		t.Fatalf("the parent is still in Stats.Shards %v after its reader stopped; the test needs it forgotten", forgetShardAfter)
	}

	// The lease taken back: the reader resumes after the recovered blocks
	// and reaches the end having stored nothing.
	r.progress.started(parent)
	lr.mu.Lock()
	lr.owned[parent] = true
	lr.mu.Unlock()
	ev, ok := r.progress.ended(parent)
	if !ok {
		t.Fatal("the parent read to its end, nothing added, is not drained")
	}
	rn.shardEnded(t.Context(), ev)
	lr.handleEvents(t.Context(), nil)
	lr.finishEnded(t.Context())
	if diff := cmp.Diff([]bool{true}, checks); diff != "" {
		t.Errorf("the parent's end judged ready (-want +got):\n%s", diff)
	}
}

// TestRecoveredCompletionOnAFreshCount pins why a completion of a block
// the recovery log held uncompleted at Start, which no reader counted
// pending, cannot make a shard look completed too early, even when it
// comes after the shard's progress was forgotten (its lease lost) and
// taken back, on the new hold's fresh count, which it takes below the
// ranges that hold has pending (the count stays at zero): every reader
// starts after the log's number (run.doneUpTo, position), so its ranges
// lie above every recovered one, and the driver completes a shard's blocks
// in order, so the greatest numbers keep the shard's end, the drain and
// the checkpoint waiting for them. The pending count matters only where a
// hold reads again below what was completed, with state per shard, which
// the driver runs without a recovery log (stream refuses both).
func TestRecoveredCompletionOnAFreshCount(t *testing.T) {
	const shard = "shard-1"
	logged := func(stream, s string) (string, bool) { return "20", stream == "s" && s == shard }
	p := newProgress()
	rn := &run{r: &Receiver{progress: p}, cfg: Config{Stream: "s", InitialPosition: TrimHorizon}, resumeAfter: logged, uncompleted: logged}
	lr := &leaseRun{rn: rn, log: slog.New(slog.DiscardHandler), owned: map[string]bool{}}
	l := lease.Lease{Shard: shard, Checkpoint: "5", WeirCheckpoint: "5"}
	read := func() batch.SeqRange {
		if got, want := lr.position(l), (position{After: "20"}); got != want {
			t.Fatalf("position %+v, want %+v: a reader starts after the recovered blocks", got, want)
		}
		r := rng(shard, "21", "30", 10)
		p.started(shard)
		lr.owned[shard] = true
		p.adding(shard)
		p.added(r)
		p.stored([]batch.SeqRange{r})
		return r
	}

	// The first hold reads 21-30 and completes it; the recovered block
	// 11-20 is not completed yet. The lease is lost, and the shard is
	// forgotten forgetShardAfter later.
	p.completed([]batch.SeqRange{read()})
	t0 := time.Unix(0, 0)
	p.stopped(shard, t0)
	lr.forget(shard)
	p.letGo(shard, t0)
	if diff := cmp.Diff([]string{shard}, p.forget(t0.Add(forgetShardAfter), forgetShardAfter)); diff != "" {
		t.Fatalf("forgot (-want +got):\n%s", diff)
	}

	// Taken back: the new hold reads 21-30 again; then the recovered block
	// completes, on the new hold's count.
	again := read()
	recovered := []batch.SeqRange{rng(shard, "11", "20", 10)}
	rn.r.recovered.completed(logged, "s", recovered)
	p.completed(recovered)
	t.Logf("ranges pending after the recovered completion: %d (one is)", p.pendingRanges(shard))
	if lr.allAddedCompleted(shard) || lr.allCompleted() || rn.completedThrough(shard, again.Last) {
		t.Error("the new hold's range is pending, yet the shard looks completed (hand-off, drain or shard end would not wait)")
	}
	if seq, _ := lr.latest(shard); seq != "20" {
		t.Errorf("checkpoint %q, want 20: nothing past the completed blocks", seq)
	}

	p.completed([]batch.SeqRange{again})
	if !lr.allAddedCompleted(shard) || !lr.allCompleted() || !rn.completedThrough(shard, again.Last) {
		t.Error("everything read is completed, yet the shard does not look so")
	}
}

// manualLeaseRun returns a lease run of a receiver with leases, a
// checkpoint interval of a minute and no DynamoDB call made, on a manual
// clock, logging JSON into logs.
func manualLeaseRun(t *testing.T) (lr *leaseRun, clk *clock.Manual, logs *bytes.Buffer) {
	t.Helper()
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1"}) // no call is made
	r, err := New(Config{Stream: "s", App: "app", Leases: &leasetable.Config{DynamoDB: db, CheckpointInterval: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	clk, logs = clock.NewManual(time.Unix(0, 0)), new(bytes.Buffer)
	rn := &run{r: r, cfg: r.cfg, clock: clk, logger: slog.New(slog.NewJSONHandler(logs, nil))}
	if lr, err = newLeaseRun(t.Context(), rn, source.Runtime[Record]{}); err != nil {
		t.Fatal(err)
	}
	return lr, clk, logs
}

// logLevels returns the JSON log records in logs by level.
func logLevels(t *testing.T, logs *bytes.Buffer) map[string][]map[string]any {
	t.Helper()
	out := make(map[string][]map[string]any)
	for line := range bytes.Lines(logs.Bytes()) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		level := fmt.Sprint(m["level"])
		out[level] = append(out[level], m)
	}
	return out
}

// drainShard has shard, owned by lr, read to its end: records 1 to 50
// added and stored, and completed if completed; its end handled, so that
// finishEnded finishes it once they are.
func drainShard(t *testing.T, lr *leaseRun, shard string, completed bool) {
	t.Helper()
	r := lr.rn.r
	rng := batch.SeqRange{Stream: "s", Shard: shard, First: "1", Last: "50", Count: 2}
	r.progress.started(shard)
	r.progress.added(rng)
	r.progress.stored([]batch.SeqRange{rng})
	if completed {
		r.blocksCompleted(t.Context(), []batch.BlockInfo{{Ranges: []batch.SeqRange{rng}}})
	}
	lr.mu.Lock()
	lr.owned[shard] = true
	lr.mu.Unlock()
	ev, ok := r.progress.ended(shard)
	if !ok {
		t.Fatal("the shard read to its end, all of it stored, is not drained")
	}
	lr.rn.shardEnded(t.Context(), ev)
	lr.handleEvents(t.Context(), nil)
}

// TestShardEndWaitWarned checks, on a manual clock, that a shard read to
// its end whose records are not completed a checkpoint interval later is
// logged once at WARN, naming the shard, the number its end waits for and
// the fix; before, its children waited without a word above INFO.
func TestShardEndWaitWarned(t *testing.T) {
	const shard = "shardId-000000000000"
	lr, clk, logs := manualLeaseRun(t) // logs written by finishEnded only, in this goroutine
	lr.rn.r.lease.Store(lr)
	drainShard(t, lr, shard, false)
	warns := func() []map[string]any { return logLevels(t, logs)["WARN"] }
	lr.finishEnded(t.Context())
	clk.Advance(time.Minute - time.Second)
	lr.finishEnded(t.Context())
	if w := warns(); len(w) != 0 {
		t.Fatalf("WARN before a checkpoint interval passed: %v", w)
	}
	clk.Advance(time.Second)
	lr.finishEnded(t.Context())
	clk.Advance(time.Minute)
	lr.finishEnded(t.Context())
	w := warns()
	if len(w) != 1 {
		t.Fatalf("%d WARNs a checkpoint interval after the shard ended, its records not completed: %v; want 1", len(w), w)
	}
	if w[0]["shard"] != shard || w[0]["waits_for"] != "50" || !strings.Contains(fmt.Sprint(w[0]["fix"]), "output") {
		t.Errorf("WARN %v; want the shard, waits_for 50 and a fix naming the outputs", w[0])
	}
}

// TestRecoveredOnlyShardForgotten checks that a shard this worker never
// reads, known only from completions of blocks the recovery log recovered,
// leaves Stats.Shards (and so the per-shard metrics) forgetShardAfter
// after the first round that saw it, as a shard read here does after its
// reader stopped; and that a lease of it taken later still ends the shard
// once read to its end (run.completedThrough). Before, such a shard stayed
// for good: one entry per shard per restart.
func TestRecoveredOnlyShardForgotten(t *testing.T) {
	const shard = "shardId-000000000007"
	r, err := New(Config{Stream: "s", App: "app"})
	if err != nil {
		t.Fatal(err)
	}
	uncompleted := func(stream, sh string) (string, bool) { return "100", stream == "s" && sh == shard }
	if err := r.begin(source.Runtime[Record]{Uncompleted: uncompleted}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	r.blocksCompleted(t.Context(), []batch.BlockInfo{{Ranges: []batch.SeqRange{{Stream: "s", Shard: shard, First: "1", Last: "100", Count: 2}}}})
	t0 := time.Unix(0, 0)
	r.forgetShards(t0)
	r.forgetShards(t0.Add(forgetShardAfter - time.Second))
	if _, ok := r.Stats().Shards[shard]; !ok {
		t.Fatalf("the shard left Stats.Shards before %v; want it kept until then", forgetShardAfter)
	}
	r.forgetShards(t0.Add(forgetShardAfter))
	if s, ok := r.Stats().Shards[shard]; ok {
		t.Errorf("the shard, never read here, still in Stats.Shards %v after its completion: %+v", forgetShardAfter, s)
	}

	rn := &run{r: r, cfg: r.cfg, uncompleted: uncompleted}
	r.progress.started(shard)
	ev, ok := r.progress.ended(shard)
	if !ok {
		t.Fatal("the shard read to its end, nothing added, is not drained")
	}
	if !rn.completedThrough(shard, ev.lastSeq) {
		t.Error("the shard, leased after it was forgotten and read to its end, waits for the recovered blocks completed before")
	}
}

// TestLostUnreadShardForgotten checks that a shard whose lease this worker
// lost before a reader read it (its state waiting to load) leaves
// CheckpointStats().Shards (and so the per-shard metrics) forgetShardAfter
// later, as a shard whose lease was handed back unread does; before,
// unregistering it at the loss left a checkpointer entry for good.
func TestLostUnreadShardForgotten(t *testing.T) {
	const shard = "shardId-000000000003"
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1"}) // no call is made
	r, err := New(Config{Stream: "s", App: "app", Leases: &leasetable.Config{DynamoDB: db}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Unix(0, 0))
	rn := &run{r: r, cfg: r.cfg, clock: clk, logger: slog.New(slog.DiscardHandler)}
	lr, err := newLeaseRun(t.Context(), rn, source.Runtime[Record]{})
	if err != nil {
		t.Fatal(err)
	}
	r.lease.Store(lr)
	lr.lose(t.Context(), nil, shard)
	if _, ok := r.CheckpointStats().Shards[shard]; !ok {
		t.Fatal("no checkpointer entry for the lost shard; the test needs one")
	}
	r.forgetShards(clk.Now())
	clk.Advance(forgetShardAfter)
	r.forgetShards(clk.Now())
	if s, ok := r.CheckpointStats().Shards[shard]; ok {
		t.Errorf("CheckpointStats().Shards[%s] %v after its lease was lost unread: %+v; want it forgotten", shard, forgetShardAfter, s)
	}
	if s, ok := r.Stats().Shards[shard]; ok {
		t.Errorf("Stats().Shards[%s] %v after its lease was lost unread: %+v; want it forgotten", shard, forgetShardAfter, s)
	}
}
