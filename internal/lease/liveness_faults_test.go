package lease

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// TestLivenessRetakeAfterIdle checks a worker that held nothing for longer
// than LeaseDuration (it finished its only shard), so that its beat stood
// still, and then takes a lease: another worker scanning before its next
// beat must count the take (a change of owner) as a sign of life, not take
// the lease it took a moment ago.
func TestLivenessRetakeAfterIdle(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 := newWorker(t, table, "w1", db, nil)
	w2 := newWorker(t, table, "w2", db, nil)
	parent := ShardInfo{ID: "shardId-000000000000"}
	child := ShardInfo{ID: "shardId-000000000001", ParentIDs: []string{parent.ID}}
	if err := w1.c.SyncShards(ctx, []ShardInfo{parent}); err != nil {
		t.Fatal(err)
	}
	period := w1.c.cfg.RenewInterval
	both := func() { stepAll(ctx, w1, w2) }
	for range 3 {
		both()
	}
	if got := w1.held(); len(got) != 1 || len(w2.held()) != 0 {
		t.Fatalf("w1 holds %v, w2 %v", got, w2.held())
	}
	if err := w1.c.Commit(ctx, parent.ID, checkpointer.ShardEnd); err != nil {
		t.Fatal(err)
	}
	for range 6 { // w1 idle for 2 LeaseDurations: its beat stands still
		both()
	}
	// The child shard appears; w1 creates its lease and takes it.
	if err := w1.c.SyncShards(ctx, []ShardInfo{parent, child}); err != nil {
		t.Fatal(err)
	}
	w1.clk.Advance(period)
	w1.c.takeCycle(ctx)
	if got := w1.held(); len(got) != 1 {
		t.Fatalf("w1 holds %v, want the child", got)
	}
	// w2's periodic scan (ScanInterval) falls before w1's next beat.
	w2.clk.Advance(w2.c.cfg.ScanInterval - w2.clk.Now().Sub(w2.c.lastScan))
	w2.c.takeCycle(ctx)
	w1.c.renewCycle(ctx)
	w1.c.deliver()
	if got := w2.held(); len(got) != 0 {
		_, lost := w1.events()
		t.Errorf("w2 took %v from live w1 moments after w1 took it (w1 lost %v)", got, lost)
	}
}

// TestLivenessRefusedBeatNoGap checks a worker whose beat landed but whose
// answer was lost, so that its next beat is refused, while its scans fail
// (throttling): it must start a new incarnation on the same board at once,
// so that the other worker, which judges it by its beat, does not take its
// leases for a dead worker's while it renews them.
func TestLivenessRefusedBeatNoGap(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	f1 := &faultDB{DynamoDBAPI: db}
	w1 := newWorker(t, table, "w1", f1, nil)
	w2 := newWorker(t, table, "w2", db, nil)
	if err := w1.c.SyncShards(ctx, shardIDs(4)); err != nil {
		t.Fatal(err)
	}
	both := func() { stepAll(ctx, w1, w2) }
	for range 6 {
		both()
	}
	if err := checkSpread([]*worker{w1, w2}, 4); err != nil {
		t.Fatal(err)
	}
	mine := w1.held()
	_, lost0 := w1.events()
	loseBeat := times(1, loseAnswer, isBeat)
	f1.setRule(func(op, expr string) fault {
		if op == "Scan" {
			return failBefore
		}
		return loseBeat(op, expr)
	})
	for range 8 {
		both()
	}
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) > len(lost0) {
		t.Errorf("w1 renewed each of %v every period, yet lost %v to w2 (w2 holds %v)", mine, lost, w2.held())
	}
}

// TestLivenessStealNoticeBoardsDisagree checks a steal while the two
// workers' boards differ (a lease with a smaller key appeared after the
// victim scanned): the notice must go where the victim beats, so that it
// stops holding the stolen lease at its next beats.
func TestLivenessStealNoticeBoardsDisagree(t *testing.T) {
	ctx := t.Context()
	w1, w2, all := disagreeingBoards(t, 4)
	period := w1.c.cfg.RenewInterval
	w2.c.cfg.MaxStealsPerCycle = 1
	w2.clk.Advance(period)
	w2.c.needScan = true
	w2.cycle(ctx)
	var stolen string // asked for: w2 names itself the owner (handoff.go)
	for s, o := range owners(t, w2.c.Table()) {
		if o == "w2" && s != all[0].ID {
			stolen = s
		}
	}
	if stolen == "" {
		t.Fatalf("w2 asked for nothing; holds %v", w2.held())
	}
	for range 2 {
		w1.clk.Advance(period)
		w1.c.renewCycle(ctx)
	}
	if w1.c.Holds(stolen) {
		t.Errorf("w1 still holds %s, stolen by w2, after two beats: the steal notice went to w2's board %s, w1 beats on %s",
			stolen, w2.c.board, w1.c.board)
	}
}

// TestLivenessLostFirstBeatAnswer checks a first beat of an incarnation
// that landed on one board but whose answer was lost, before a scan moved
// the worker to another board (a lease with a smaller key appeared): the
// incarnation must be dropped, not written again on the new board, or the
// same beat would stand on two items, a kill could remove the wrong copy,
// and a suspended worker would keep leases another took. The kill's copy
// depends on map order, hence the trials.
func TestLivenessLostFirstBeatAnswer(t *testing.T) {
	for trial := range 30 {
		if both := duplicateBeatTrial(t); len(both) > 0 {
			t.Fatalf("trial %d: w1 and w2 both hold %v", trial, both)
		}
	}
}

func duplicateBeatTrial(t *testing.T) []string {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t) + strconv.Itoa(rand.IntN(1e6))
	f1 := &faultDB{DynamoDBAPI: db}
	w1 := newWorker(t, table, "w1", f1, nil)
	all := shardIDs(3)
	if err := w1.c.SyncShards(ctx, all[1:]); err != nil {
		t.Fatal(err)
	}
	period := w1.c.cfg.RenewInterval
	w1.cycle(ctx) // takes shards 1 and 2; board shard 1
	f1.setRule(times(1, loseAnswer, isBeat))
	w1.clk.Advance(period)
	w1.c.renewCycle(ctx) // the first beat lands on shard 1; its answer is lost
	if w1.c.myBeat != 0 || w1.c.beatName != "" {
		t.Fatalf("after a first beat whose answer was lost: beat %d, incarnation %q; want it dropped", w1.c.myBeat, w1.c.beatName)
	}
	if err := w1.c.SyncShards(ctx, all); err != nil { // creates shard 0
		t.Fatal(err)
	}
	w1.clk.Advance(period)
	w1.c.takeCycle(ctx)  // board shard 0; takes it
	w1.c.renewCycle(ctx) // a new incarnation's first beat, on shard 0, and renewals
	if w1.c.board != all[0].ID || w1.c.myBeat != 1 {
		t.Fatalf("board %q, beat %d", w1.c.board, w1.c.myBeat)
	}
	resume := suspendMidBeat(ctx, w1) // its beat held in flight, its clock stopped

	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 })
	for i := 0; len(w2.held()) < 3; i++ {
		if i > 10 {
			t.Fatalf("w2 never took w1's leases; it holds %v", w2.held())
		}
		w2.clk.Advance(period)
		w2.cycle(ctx)
	}
	resume()
	for range 2 { // a few more beats while the clock hardly moves
		w1.clk.Advance(period / 10)
		w1.c.renewCycle(ctx)
	}
	w1.c.deliver()
	return heldByBoth(w2, w1)
}

// TestLivenessMixedRenewEveryLease checks a fleet turning RenewEveryLease
// off worker by worker (the end of a rolling upgrade): a worker that still
// renews every lease must judge a beating worker by its beat, not by its
// leases' counters, which stand still, and never hold a lease the beating
// worker holds too.
func TestLivenessMixedRenewEveryLease(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 := newWorker(t, table, "w1", db, nil)
	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { c.RenewEveryLease = true })
	if err := w1.c.SyncShards(ctx, shardIDs(4)); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		stepAll(ctx, w1, w2)
	}
	if both := heldByBoth(w2, w1); len(both) > 0 {
		t.Errorf("w1 and w2 both hold %v (w1 holds %v, w2 %v)", both, w1.held(), w2.held())
	}
}
