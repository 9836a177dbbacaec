package lease

import (
	"errors"
	"testing"

	"github.com/weirstream/weir/internal/checkpointer"
)

const seq3 = "49590338271490256608559692538361571095921575989136588900"

// givenBackBeforeHolderLearns has w2 ask for a lease of w1 and drain
// before w1 learned of the request: w2 gives the lease back (owner w1
// again, the counter two past the one w1 last wrote, w1's checkpoint), and
// w1 still holds it. It returns the pair and that shard.
func givenBackBeforeHolderLearns(t *testing.T) (w1, w2 *worker, shard string) {
	t.Helper()
	ctx := t.Context()
	w1, w2 = handoffPair(t, func(string) {})
	w2.cycle(ctx) // asks for one
	shard = askedBy(t, w2)
	if err := w2.c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if l := mustGet(t, w1.c.Table(), shard); l.Owner != "w1" || l.CheckpointOwner != "" || l.Checkpoint != seq1 {
		t.Fatalf("after the asker drained, %s is %+v; want it given back to w1 at %s", shard, l, seq1)
	}
	return w1, w2, shard
}

// TestCommitOnLeaseGivenBack has w2 ask for a lease of w1 and give it back
// (it drains) before w1 learned of the request: w1's next checkpoint,
// refused by the counter the request and the give-back moved, is written
// on the lease given back, not taken for a loss; w1's Drain then frees the
// lease at that checkpoint, so whoever takes it next reads nothing twice.
func TestCommitOnLeaseGivenBack(t *testing.T) {
	ctx := t.Context()
	w1, _, shard := givenBackBeforeHolderLearns(t)
	if err := w1.c.Commit(ctx, shard, seq2); err != nil {
		t.Fatalf("w1's checkpoint on the lease given back: %v, want it written", err)
	}
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 0 {
		t.Errorf("w1 reported %v lost; the lease was given back to it", lost)
	}
	if l := mustGet(t, w1.c.Table(), shard); l.Owner != "w1" || l.Checkpoint != seq2 {
		t.Fatalf("after the checkpoint, %s is %+v; want w1's at %s", shard, l, seq2)
	}
	if err := w1.c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if l := mustGet(t, w1.c.Table(), shard); l.Owner != "" || l.CheckpointOwner != "" || l.Checkpoint != seq2 {
		t.Errorf("after w1 drained, %s is %+v; want it free at w1's final checkpoint %s", shard, l, seq2)
	}
}

// TestRenewOnLeaseGivenBack is TestCommitOnLeaseGivenBack for a renewal
// (RenewEveryLease): refused by the counter the give-back moved, it is
// written on the lease given back and the lease kept.
func TestRenewOnLeaseGivenBack(t *testing.T) {
	ctx := t.Context()
	w1, _, shard := givenBackBeforeHolderLearns(t)
	w1.c.cfg.RenewEveryLease = true
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 0 {
		t.Errorf("w1 reported %v lost at a renewal; the lease was given back to it", lost)
	}
	if !w1.c.Holds(shard) {
		t.Errorf("w1 no longer Holds %s after renewing the lease given back", shard)
	}
	if err := w1.c.Commit(ctx, shard, seq2); err != nil {
		t.Errorf("w1's checkpoint after the renewal: %v", err)
	}
}

// TestCommitOnLeaseGivenBackMoved is TestCommitOnLeaseGivenBack with the
// lease's checkpoint moved by another writer after the give-back (the
// table names w1 its owner, but not at the checkpoint w1 last wrote): the
// lease is not w1's as it left it, so the checkpoint is refused as lost.
func TestCommitOnLeaseGivenBackMoved(t *testing.T) {
	ctx := t.Context()
	w1, _, shard := givenBackBeforeHolderLearns(t)
	now := mustGet(t, w1.c.Table(), shard)
	if _, err := w1.c.Table().Checkpoint(ctx, now, seq3, 0); err != nil {
		t.Fatal(err)
	}
	if err := w1.c.Commit(ctx, shard, seq2); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Fatalf("w1's checkpoint on a lease another writer moved: %v, want ErrLeaseLost", err)
	}
	if l := mustGet(t, w1.c.Table(), shard); l.Checkpoint != seq3 {
		t.Errorf("%s is at %s; want the other writer's %s untouched", shard, l.Checkpoint, seq3)
	}
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 1 || lost[0] != shard {
		t.Errorf("w1 reported %v lost, want [%s]", lost, shard)
	}
}

// askAndGiveBack has another worker, w2, ask for shard's lease and give it
// back, as a worker that drains before the holder learned of the request.
func askAndGiveBack(t *testing.T, tbl *Table, shard string) {
	t.Helper()
	asked, err := tbl.requestHandoff(t.Context(), mustGet(t, tbl, shard), "w2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.dropAsked(t.Context(), asked); err != nil {
		t.Fatal(err)
	}
}

// TestCommitUnansweredThenGivenBack has a checkpoint write get no answer
// (applied), and the lease then be asked for and given back: the next
// commit of that same checkpoint (a Checkpointer trying it again) keeps
// the lease without writing the number again, and a commit of a later
// checkpoint is written on the lease given back.
func TestCommitUnansweredThenGivenBack(t *testing.T) {
	ctx := t.Context()
	w, l := lossyWorker(t, 2, nil)
	shards := ids(shardIDs(2))
	for _, s := range shards {
		l.unanswered(isCheckpointBody)
		if err := w.c.Commit(ctx, s, "100"); err == nil || errors.Is(err, checkpointer.ErrLeaseLost) {
			t.Fatalf("Commit without an answer = %v, want an error other than ErrLeaseLost", err)
		}
		l.plan(nil)
		askAndGiveBack(t, w.c.Table(), s)
	}

	sent := l.sentMatching(isCheckpointBody)
	if err := w.c.Commit(ctx, shards[0], "100"); err != nil {
		t.Fatalf("the same checkpoint again on the lease given back: %v, want nil", err)
	}
	if n := l.sentMatching(isCheckpointBody) - sent; n != 1 {
		t.Errorf("%d checkpoint writes sent, want 1 (the refused one; the number is not written twice)", n)
	}
	if err := w.c.Commit(ctx, shards[0], "200"); err != nil {
		t.Fatalf("the next checkpoint: %v", err)
	}

	if err := w.c.Commit(ctx, shards[1], "200"); err != nil {
		t.Fatalf("a later checkpoint on the lease given back: %v, want it written", err)
	}
	w.c.deliver()
	if _, lost := w.events(); len(lost) != 0 {
		t.Fatalf("lost %v; want both leases kept", lost)
	}
	for _, s := range shards {
		if got := mustGet(t, w.c.Table(), s); got.Checkpoint != "200" || got.Owner != "w" || !w.c.Holds(s) {
			t.Errorf("lease %+v (held %v), want checkpoint 200 owned and held by w", got, w.c.Holds(s))
		}
	}
}
