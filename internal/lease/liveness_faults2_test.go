package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/weirstream/weir/internal/localaws"
)

// TestLivenessRefusedBeatThenRenewalFails checks a suspended worker (clock
// stopped, beat in flight) taken for dead whose renewals fail transiently
// (throttling) after its refused beat: the beats of its new incarnation
// must not vouch for leases not renewed since the refusal, which the other
// worker took.
func TestLivenessRefusedBeatThenRenewalFails(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	f1 := &faultDB{DynamoDBAPI: db}
	w1 := newWorker(t, table, "w1", f1, nil)
	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 })
	shards := shardIDs(3)
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	period := w1.c.cfg.RenewInterval
	w1.cycle(ctx)
	for range 2 {
		w1.clk.Advance(period)
		w1.c.renewCycle(ctx)
	}
	w2.cycle(ctx)

	resume := suspendMidBeat(ctx, w1) // its beat held in flight, its clock stopped
	for range 4 {
		w2.clk.Advance(period)
		w2.cycle(ctx)
	}
	if len(w2.held()) != 3 {
		t.Fatalf("w2 holds %v, want all 3", w2.held())
	}
	f1.setRule(times(1<<30, failBefore, isRenew)) // w1's renewals after the refusal fail
	resume()
	f1.setRule(nil)
	for range 3 { // the new incarnation's next beats succeed
		w1.clk.Advance(period)
		w1.c.renewCycle(ctx)
	}
	w1.c.deliver()
	if both := heldByBoth(w2, w1); len(both) > 0 {
		t.Errorf("w1 and w2 both hold %v: w1's beats vouch for leases it never renewed after its beat was refused", both)
	}
}

// TestLivenessPausedSoleWorkerRetakes checks the only worker, paused (its
// clock running) for longer than LeaseDuration: it counts its leases lost,
// though the table still names it owner, and must take them back at its
// next take cycles, not after ScanInterval.
func TestLivenessPausedSoleWorkerRetakes(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "w", db, nil)
	shards := shardIDs(3)
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		stepAll(ctx, w)
	}
	if len(w.held()) != 3 {
		t.Fatalf("w holds %v", w.held())
	}
	w.clk.Advance(w.c.cfg.LeaseDuration + w.c.cfg.RenewInterval) // paused
	for range 6 {                                                // two lease durations of normal operation
		stepAll(ctx, w)
	}
	if got := w.held(); len(got) != 3 {
		t.Errorf("w holds %v two lease durations after a pause, want all 3 back; the table says %v", got, owners(t, w.c.Table()))
	}
}

// TestLivenessRetakeOwnLeaseAfterPause checks a worker paused (clock
// running) past LeaseDuration that takes its own leases back at its next
// scan: the retake keeps the owner, so it is no news to another worker
// judging it by its beat (still since the pause), which may take them
// again; the worker must not trust them until a beat sent after the retake
// succeeds.
func TestLivenessRetakeOwnLeaseAfterPause(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { c.ScanInterval = 2 * testLease })
	w0 := newWorker(t, table, "w0", db, func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 })
	shards := shardIDs(4)
	if err := w2.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		stepAll(ctx, w2, w0)
	}
	if len(w2.held()) != 4 || len(w0.held()) != 0 {
		t.Fatalf("w2 holds %v, w0 %v", w2.held(), w0.held())
	}
	// w2 pauses, its clock running, until its periodic scan is due.
	w2.clk.Advance(w2.c.cfg.ScanInterval - w2.clk.Now().Sub(w2.c.lastScan))
	w2.cycle(ctx) // loses every lease on its clock, then its scan takes them back
	if len(w2.held()) != 4 {
		t.Fatalf("w2 holds %v after its scan, want its 4 leases back", w2.held())
	}
	// w0 saw w2's beat last before the pause, and looks again now.
	w0.clk.Advance(w0.c.cfg.LeaseDuration + w0.c.cfg.RenewInterval)
	w0.cycle(ctx)
	if both := heldByBoth(w0, w2); len(both) > 0 {
		t.Errorf("w0 and w2 both hold %v: w0 took them moments after w2 took them back", both)
	}
}

// TestLivenessOrphanedOwnLease checks takes whose answers were lost, which
// leave leases the table names this worker's but which it does not hold:
// other workers count them as this live worker's, so it must take them
// back whatever its target, or their shards are read by no one.
func TestLivenessOrphanedOwnLease(t *testing.T) {
	for trial := range 10 {
		if msg := orphanTrial(t); msg != "" {
			t.Fatalf("trial %d: %s", trial, msg)
		}
	}
}

func orphanTrial(t *testing.T) string {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t) + strconv.Itoa(rand.IntN(1e6))
	shards := shardIDs(4)
	f0 := &faultDB{DynamoDBAPI: db}
	noSteal := func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 }
	w0 := newWorker(t, table, "w0", f0, noSteal)
	w1 := newWorker(t, table, "w1", db, noSteal)
	if err := w1.c.SyncShards(ctx, shards[3:]); err != nil {
		t.Fatal(err)
	}
	stepAll(ctx, w1) // w1 takes shard 3
	if err := w0.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	f0.setRule(times(2, loseAnswer, isTake))
	stepAll(ctx, w0) // target 2: both takes land, both answers are lost
	for range 12 {   // four lease durations
		stepAll(ctx, w0, w1)
	}
	held := map[string]bool{}
	for _, w := range []*worker{w0, w1} {
		for _, s := range w.held() {
			held[s] = true
		}
	}
	if len(held) != 4 {
		return fmt.Sprintf("after 4 lease durations w0 holds %v, w1 %v; the table says %v", w0.held(), w1.held(), owners(t, w0.c.Table()))
	}
	return ""
}

// TestLivenessStealNoticeRetried checks that a steal notice whose write
// failed is written again at the thief's next take cycle, so that the
// victim stops holding the stolen lease at its next beat after that rather
// than at its next checkpoint of the shard or scan.
func TestLivenessStealNoticeRetried(t *testing.T) {
	ctx := t.Context()
	w1, w2, victim := noticeFails(t)
	w2.c.take(ctx, mustGet(t, w2.c.Table(), victim)) // a steal; its notice fails
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	if !w1.c.Holds(victim) {
		t.Fatal("w1 learnt of the steal though its notice was not written")
	}
	noticeAgain(ctx, w1, w2)
	if _, lost := w1.events(); len(lost) != 1 || lost[0] != victim {
		t.Errorf("w1 lost %v after the notice was written again, want [%s]", lost, victim)
	}
}

// TestLivenessHandoffNoticeRetried is TestLivenessStealNoticeRetried for a
// hand-off asked for (a steal from a live worker, the default): its notice,
// whose first write failed, is written again at the asker's next take
// cycle, though the asker does not hold the lease yet, so the holder hands
// it off at its next beat rather than at its next scan (ScanInterval, 10
// minutes by default) or its next write of the lease (none while it reads
// nothing of the shard).
func TestLivenessHandoffNoticeRetried(t *testing.T) {
	ctx := t.Context()
	w1, w2, victim := noticeFails(t)
	w2.c.requestHandoff(ctx, mustGet(t, w2.c.Table(), victim)) // its notice fails
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	if w1.c.HoldOf(victim) != Held {
		t.Fatalf("w1's hold of %s is %v: it learnt of the request though its notice was not written", victim, w1.c.HoldOf(victim))
	}
	noticeAgain(ctx, w1, w2)
	if _, lost := w1.events(); len(lost) != 1 || lost[0] != victim {
		t.Errorf("w1 handed off %v after the notice was written again, want [%s]", lost, victim)
	}
}

// TestLivenessResumedWorkerRebalances checks a worker paused (clock
// stopped) while another took all its leases, whose first act on resuming
// is a scan (a take cycle's): the scan shows its leases lost, and it must
// ask for its share back within a few take cycles, not only at its next
// periodic scan (ScanInterval later): the leases the scan saw go count as
// held in that scan's plan, so that plan takes nothing.
func TestLivenessResumedWorkerRebalances(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 := newWorker(t, table, "w1", db, nil)
	shards := shardIDs(4)
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		stepAll(ctx, w1)
	}
	if len(w1.held()) != 4 {
		t.Fatalf("w1 holds %v, want all 4", w1.held())
	}
	// w1 pauses, its clock stopped; w2 takes every lease.
	w2 := newWorker(t, table, "w2", db, nil)
	for i := 0; len(w2.held()) < 4; i++ {
		if i == 20 {
			t.Fatalf("w2 holds %v after %d cycles, want all 4", w2.held(), i)
		}
		stepAll(ctx, w2)
	}
	// w1 resumes with a scan, which shows every lease lost.
	w1.c.scanCycle(ctx)
	w1.c.deliver()
	if got := w1.held(); len(got) != 0 {
		t.Fatalf("w1 holds %v after the scan that shows them taken", got)
	}
	for range 10 { // 10 renewal periods: far less than ScanInterval
		stepAll(ctx, w1, w2)
	}
	if len(w1.held()) != 2 || len(w2.held()) != 2 {
		t.Errorf("after 10 periods w1 holds %v and w2 %v, want 2 each; the table says %v", w1.held(), w2.held(), owners(t, w1.c.Table()))
	}
}

// noticeFails returns two workers on a new table of 4 shards: w1 holds
// them all and has beaten twice, w2 has seen its beat and steals without
// limit, and w2's first write of a notice fails; and victim, a lease of
// w1's.
func noticeFails(t *testing.T) (w1, w2 *worker, victim string) {
	t.Helper()
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 = newWorker(t, table, "w1", db, nil)
	f2 := &faultDB{DynamoDBAPI: db}
	f2.setRule(times(1, failBefore, isNote))
	w2 = newWorker(t, table, "w2", f2, func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 })
	if err := w1.c.SyncShards(ctx, shardIDs(4)); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	for range 2 {
		w1.clk.Advance(w1.c.cfg.RenewInterval)
		w1.c.renewCycle(ctx)
	}
	w2.cycle(ctx) // sees w1's beat
	return w1, w2, w1.held()[2]
}

// noticeAgain runs w2's next take cycle, which writes its failed notice
// again, then w1's next renew cycle, which reads it, and delivers w1's
// events.
func noticeAgain(ctx context.Context, w1, w2 *worker) {
	w2.clk.Advance(w2.c.cfg.TakeInterval)
	w2.c.takeCycle(ctx) // writes the notice again
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	w1.c.deliver()
}
