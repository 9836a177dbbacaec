package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// TestRetakeBeforeAssignerKeepsCheckpoint wires a Checkpointer and lease
// events as source/kinesis/leases.go does: the shard registered with the
// committer of its hold (CommitterFor), and the events handled by an
// assigner later.
//
// w1 holds S and checkpoints 100; its completed progress reaches 150. w1
// freezes; w2 judges it dead, takes S, checkpoints 200 and drains
// (releasing S). w1 resumes: its beat is refused, S's renewal is refused
// (lost, event queued), and its next take cycle takes S back (free) from
// checkpoint 200 (acquired, event queued). Before the assigner handles
// those events, the checkpoint timer fires with the first hold's progress
// (150): it must not be written on the second hold, below w2's 200, and
// the first hold's reader must not deliver.
func TestRetakeBeforeAssignerKeepsCheckpoint(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 := newWorker(t, table, "w1", db, nil)
	w2 := newWorker(t, table, "w2", db, nil)
	shards := shardIDs(1)
	s := shards[0].ID
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	period := w1.c.cfg.RenewInterval
	w1.cycle(ctx)
	for range 2 { // the first beat, then one that vouches for the lease
		w1.clk.Advance(period)
		w1.c.renewCycle(ctx)
	}
	if !w1.c.Holds(s) {
		t.Fatalf("setup: w1 does not hold %s: %v", s, w1.c.HoldOf(s))
	}
	w1Acquired, _ := w1.events()
	if len(w1Acquired) != 1 {
		t.Fatalf("setup: w1 acquired %v", w1Acquired)
	}

	// w1's checkpointer, as newLeaseRun builds it, on its own manual clock
	// so that the test decides when the timer fires.
	cpClk := clock.NewManual(time.Unix(1_700_000_000, 0))
	var latest string // w1's latest completed sequence number of S
	var latestMu = make(chan struct{}, 1)
	latestMu <- struct{}{}
	committed := make(chan error, 16)
	cp, err := checkpointer.New(checkpointer.Config{
		Interval: time.Minute,
		Latest: func(string) (string, bool) {
			<-latestMu
			defer func() { latestMu <- struct{}{} }()
			return latest, latest != ""
		},
		Clock:          cpClk,
		CommitAttempts: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	setLatest := func(v string) { <-latestMu; latest = v; latestMu <- struct{}{} }
	// The Committer is the first hold's, as in leases.go; the wrapper only
	// tells the test that a commit of the timer returned.
	first := w1.acquired[0]
	holds := w1.c.CommitterFor(first)
	coordCommitter := checkpointer.CommitterFunc(func(ctx context.Context, shard, seq string) error {
		err := holds.Commit(ctx, shard, seq)
		committed <- err
		return err
	})
	// OnAcquired (first hold), handled by the assigner: Register.
	if err := cp.Register(s, coordCommitter, w1.acquired[0].Checkpoint); err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = cp.Run(runCtx) }()
	defer func() { stopRun(); <-runDone }()
	fire := func() error {
		t.Helper()
		if err := cpClk.WaitForWaiters(ctx, 1); err != nil {
			t.Fatal(err)
		}
		cpClk.Advance(time.Minute)
		select {
		case err := <-committed:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("the checkpoint timer committed nothing")
			return nil
		}
	}

	setLatest("100")
	if err := fire(); err != nil {
		t.Fatalf("first checkpoint: %v", err)
	}
	if l := mustGet(t, w1.c.Table(), s); l.Checkpoint != "100" {
		t.Fatalf("setup: checkpoint %s, want 100", l.Checkpoint)
	}
	setLatest("150") // completed further, not checkpointed yet

	// w1 freezes (its clock stands still, it runs nothing). w2 takes S over.
	w2.cycle(ctx)
	for i := 0; i < 6 && !w2.c.Holds(s); i++ {
		w2.clk.Advance(period)
		w2.cycle(ctx)
	}
	if !w2.c.Holds(s) {
		t.Fatalf("setup: w2 did not take %s", s)
	}
	if err := w2.c.Commit(ctx, s, "200"); err != nil {
		t.Fatal(err)
	}
	if err := w2.c.Drain(ctx); err != nil { // w2 stops gracefully: S is free
		t.Fatal(err)
	}

	// w1 resumes: the renewal goroutine and the take goroutine run; the
	// assigner is busy (it has not handled the events yet).
	w1.clk.Advance(period)
	w1.c.renewCycle(ctx) // beat refused: new incarnation, S's renewal refused: lost
	w1.clk.Advance(w1.c.cfg.TakeInterval)
	w1.c.takeCycle(ctx) // S is free: taken back
	if !w1.c.Holds(s) {
		t.Fatalf("setup: w1 did not take %s back: %v (table: %+v)", s, w1.c.HoldOf(s), mustGet(t, w1.c.Table(), s))
	}
	before := mustGet(t, w1.c.Table(), s)
	t.Logf("lease after w1 took it back: owner=%s counter=%d checkpoint=%s", before.Owner, before.Counter, before.Checkpoint)
	if before.Checkpoint != "200" {
		t.Fatalf("setup: checkpoint %s after the retake, want w2's 200", before.Checkpoint)
	}

	// The first hold's reader delivers nothing: the second hold is not its.
	if got := w1.c.HoldOfLease(first); got != Lapsed {
		t.Errorf("HoldOfLease of the first hold = %v, want Lapsed (the shard is held again, from w2's checkpoint)", got)
	}

	// The checkpoint timer fires before the assigner handled lost/acquired.
	err = fire()
	after := mustGet(t, w1.c.Table(), s)
	if !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("the first hold's commit after the retake: %v, want ErrLeaseLost", err)
	}
	if after.Checkpoint != "200" || after.Owner != "w1" {
		t.Errorf("lease after the first hold's commit: owner %s, checkpoint %s; want w1's second hold at w2's 200", after.Owner, after.Checkpoint)
	}

	// The assigner now handles the events, as leases.go does; the second
	// hold commits.
	w1.c.deliver()
	acq, lost := w1.events()
	if len(acq) != 2 || len(lost) != 1 {
		t.Fatalf("events delivered to the assigner: acquired %v, lost %v; want the retake's after the loss", acq, lost)
	}
	w1.mu.Lock()
	second := w1.acquired[1]
	w1.mu.Unlock()
	if got := w1.c.HoldOfLease(second); got == Lapsed {
		t.Errorf("HoldOfLease of the second hold = %v", got)
	}
	if err := w1.c.CommitterFor(second).Commit(ctx, s, "250"); err != nil {
		t.Fatalf("the second hold's commit: %v", err)
	}
	if l := mustGet(t, w1.c.Table(), s); l.Checkpoint != "250" {
		t.Errorf("checkpoint %s after the second hold's commit, want 250", l.Checkpoint)
	}
}
