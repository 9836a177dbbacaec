package lease

import "testing"

// TestCheckpointWhileBeatsFailThenNewIncarnation has w0's beats fail while
// a checkpoint of its lease succeeds (so the lease looks freshly renewed),
// w1 take the lease from w0, judged dead by its beat, and w0's next beat
// be refused: w0 starts a new incarnation, whose first beat succeeds,
// while the renewal of the lease fails. Before, w0 trusted the lease again
// (HoldOf Held: the new beat and the recent checkpoint) although w1 held
// it: both workers delivered the shard until w0's renewal was refused. Now
// a lease a refused beat left unvouched is Renewing, not Held, until its
// own next conditional write. Found by a review's randomized fleet fuzz (dynalite).
func TestCheckpointWhileBeatsFailThenNewIncarnation(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := "unvouched-after-new-incarnation"
	f0 := &faultDB{DynamoDBAPI: db}
	w0 := newWorker(t, table, "w0", f0, nil)
	w1 := newWorker(t, table, "w1", db, nil)
	if err := w0.c.SyncShards(ctx, shardIDs(1)); err != nil {
		t.Fatal(err)
	}
	s := shardIDs(1)[0].ID
	period := w0.c.cfg.RenewInterval
	step := func(ws ...*worker) {
		w0.clk.Advance(period)
		w1.clk.Advance(period)
		for _, w := range ws {
			w.cycle(ctx)
		}
	}
	w0.cycle(ctx)
	step(w0)
	step(w0, w1)
	if !w0.c.Holds(s) || w1.c.Holds(s) {
		t.Fatalf("setup: w0 holds %v, w1 holds %v; want w0 alone", w0.c.Holds(s), w1.c.Holds(s))
	}
	f0.setRule(func(op, expr string) fault { // w0's beats fail
		if op == "UpdateItem" && isBeat(expr) {
			return failBefore
		}
		return noFault
	})
	step(w0, w1)
	step(w0, w1)
	if err := w0.c.Commit(ctx, s, "1001"); err != nil { // a checkpoint succeeds
		t.Fatalf("commit: %v", err)
	}
	step(w0)
	step(w0)
	w1.cycle(ctx) // judges w0 dead by its beat, takes the lease
	if !w1.c.Holds(s) {
		t.Fatalf("w1 did not take %s: HoldOf %v", s, w1.c.HoldOf(s))
	}
	f0.setRule(func(op, expr string) fault { // beats work; the renewal fails
		if op == "UpdateItem" && isRenew(expr) {
			return failBefore
		}
		return noFault
	})
	w0.clk.Advance(period / 10)
	w0.c.renewCycle(ctx)
	w0.c.deliver()
	if w0.c.Holds(s) && w1.c.Holds(s) {
		l, _, _ := w0.c.Table().Get(ctx, s)
		t.Fatalf("both workers trust %s (w0 %v, w1 %v); the table's owner is %s", s, w0.c.HoldOf(s), w1.c.HoldOf(s), l.Owner)
	}
	if h := w0.c.HoldOf(s); h != Renewing && h != Lapsed {
		t.Errorf("w0's HoldOf = %v, want Renewing (its renewal failed) or Lapsed", h)
	}
}
