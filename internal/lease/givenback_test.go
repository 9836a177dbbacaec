package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
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

// beforeWriteDB wraps a DynamoDB client and runs a hook once, before the
// next UpdateItem whose update expression match accepts is sent on: what
// the hook does happens while that write is in flight.
type beforeWriteDB struct {
	leasetable.DynamoDBAPI
	mu    sync.Mutex
	match func(expr string) bool
	hook  func()
}

// once sets the hook for the next UpdateItem that match accepts.
func (d *beforeWriteDB) once(match func(expr string) bool, hook func()) {
	d.mu.Lock()
	d.match, d.hook = match, hook
	d.mu.Unlock()
}

func (d *beforeWriteDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	d.mu.Lock()
	hook := d.hook
	if hook != nil && d.match(aws.ToString(in.UpdateExpression)) {
		d.hook = nil
	} else {
		hook = nil
	}
	d.mu.Unlock()
	if hook != nil {
		hook()
	}
	return d.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// isCheckpoint matches the update expression of a checkpoint write.
func isCheckpoint(expr string) bool { return strings.Contains(expr, "#ckpt = :ckpt") }

// TestWriteInFlightAsHandoffStartsThenGivenBack has a write of w1's lease
// (a checkpoint, or a renewal with RenewEveryLease) in flight while
// another worker, w2, asks for the lease, w1's take cycle scan sees the
// request and starts the hand-off (OnHandoff), and w2 gives the lease back
// (it drains). The write, refused by the counter the request and the
// give-back moved, is on the lease as w1 left it, named w1's again: it is
// sent again on the lease given back, not taken for a loss (which had w1
// take the lease back from the checkpoint before, reading again what it had
// delivered). w1 then completes the hand-off it was told of: its last
// checkpoint lands, HandOff finds the lease its own and w1 takes it back at
// its next take cycle from that checkpoint. The same when no scan saw the
// request: the refused checkpoint's read-back starts the hand-off, and the
// give-back lands while the checkpoint sent again on the lease asked for
// is in flight.
func TestWriteInFlightAsHandoffStartsThenGivenBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		renew bool // the write in flight is a renewal, not a checkpoint
		// resent: the give-back lands while the checkpoint, refused, is
		// sent again on the lease asked for, not before a scan.
		resent bool
	}{
		{name: "checkpoint"},
		{name: "renewal", renew: true},
		{name: "checkpoint sent again", resent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			db := &beforeWriteDB{DynamoDBAPI: servers.Env(t).DynamoDB()}
			var mu sync.Mutex
			var asked []string
			w := newWorker(t, localaws.UniqueName(t), "w1", db, func(c *CoordinatorConfig) {
				c.RenewEveryLease = tc.renew
				c.OnHandoff = func(s string) { mu.Lock(); asked = append(asked, s); mu.Unlock() }
			})
			tbl := w.c.Table()
			shard := ids(shardIDs(1))[0]
			if err := w.c.SyncShards(ctx, shardIDs(1)); err != nil {
				t.Fatal(err)
			}
			w.cycle(ctx)
			w.clk.Advance(w.c.cfg.RenewInterval)
			w.cycle(ctx)
			if err := w.c.Commit(ctx, shard, seq1); err != nil {
				t.Fatal(err)
			}

			match, last := isCheckpoint, seq2
			if tc.renew {
				match, last = isRenew, seq1
			}
			var during []string
			db.once(match, func() {
				req, err := tbl.requestHandoff(ctx, mustGet(t, tbl, shard), "w2")
				if err != nil {
					during = append(during, fmt.Sprintf("w2's request: %v", err))
					return
				}
				giveBack := func() {
					if _, err := tbl.dropAsked(ctx, req); err != nil {
						during = append(during, fmt.Sprintf("w2's give-back: %v", err))
					}
				}
				if tc.resent {
					db.once(match, giveBack)
					return
				}
				if got := w.scanNow(ctx, shard); got != HandingOff { // its scan sees the request
					during = append(during, fmt.Sprintf("w1's hold after its scan saw the request: %v, want HandingOff", got))
				}
				giveBack()
			})
			if tc.renew {
				w.clk.Advance(w.c.cfg.RenewInterval)
				w.c.renewCycle(ctx)
			} else if err := w.c.Commit(ctx, shard, seq2); err != nil {
				t.Errorf("w1's checkpoint in flight as the hand-off started, then given back: %v, want it written", err)
			}
			for _, d := range during {
				t.Error(d)
			}
			w.c.deliver()
			if !toldOnceNotLost(t, w, &mu, &asked, shard) {
				t.FailNow()
			}
			if l := mustGet(t, tbl, shard); l.Owner != "w1" || l.CheckpointOwner != "" || l.Checkpoint != last {
				t.Fatalf("after the write, %s is %+v; want w1's at %s", shard, l, last)
			}

			// The hand-off w1 was told of, completed.
			handOffGivenBack(t, w, shard, seq3)
			w.clk.Advance(w.c.cfg.RenewInterval)
			w.cycle(ctx)
			if !w.c.Holds(shard) {
				t.Errorf("w1 does not hold %s (%v) after its next take cycle and beat; the table says %+v", shard, w.c.HoldOf(shard), mustGet(t, tbl, shard))
			}
			w.mu.Lock()
			got := slices.Clone(w.acquired)
			w.mu.Unlock()
			if n := len(got); n != 2 || got[1].Shard != shard || got[1].Checkpoint != seq3 {
				t.Errorf("w1 acquired %+v; want %s first, then taken back at its last checkpoint %s", got, shard, seq3)
			}
			if _, lost := w.events(); len(lost) != 0 {
				t.Errorf("w1 reported %v lost", lost)
			}
		})
	}
}

// TestCommitUnansweredThenHandoffSeenThenGivenBack has a checkpoint write
// get no answer (applied), then another worker ask for the lease, this
// worker's scan see the request and start the hand-off (which forgets the
// writes without an answer: the request was conditional on the counter
// the applied one moved), and the asker give the lease back. The
// checkpoint tried again, then a later one, are written on the lease given
// back; the hand-off the worker was told of completes, and its next take
// cycle takes the lease back at the last checkpoint: nothing lost, nothing
// read twice.
func TestCommitUnansweredThenHandoffSeenThenGivenBack(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	var asked []string
	w, l := lossyWorker(t, 1, func(c *CoordinatorConfig) {
		c.OnHandoff = func(s string) { mu.Lock(); asked = append(asked, s); mu.Unlock() }
	})
	shard := ids(shardIDs(1))[0]
	tbl := w.c.Table()
	l.unanswered(isCheckpointBody)
	if err := w.c.Commit(ctx, shard, "100"); err == nil || errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Fatalf("Commit without an answer = %v, want an error other than ErrLeaseLost", err)
	}
	l.plan(nil)
	if got := mustGet(t, tbl, shard); got.Checkpoint != "100" {
		t.Fatalf("the unanswered checkpoint did not land: %+v; the test needs it to", got)
	}
	req, err := tbl.requestHandoff(ctx, mustGet(t, tbl, shard), "w2")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.scanNow(ctx, shard); got != HandingOff { // its scan sees the request
		t.Fatalf("hold after the scan saw the request: %v, want HandingOff", got)
	}
	if _, err := tbl.dropAsked(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Commit(ctx, shard, "100"); err != nil {
		t.Errorf("the unanswered checkpoint tried again on the lease given back: %v, want nil", err)
	}
	handOffGivenBack(t, w, shard, "200")
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.cycle(ctx)
	toldOnceNotLost(t, w, &mu, &asked, shard)
	if got := mustGet(t, tbl, shard); got.Owner != "w" || got.Checkpoint != "200" || !w.c.Holds(shard) {
		t.Errorf("lease %+v (held %v), want w's, at checkpoint 200, held", got, w.c.HoldOf(shard))
	}
}

// toldOnceNotLost reports whether OnHandoff, which appends to asked under
// mu, was called once, for shard, and w reported no lease lost (the lease
// was given back to it); it says what was wrong otherwise.
func toldOnceNotLost(t *testing.T, w *worker, mu *sync.Mutex, asked *[]string, shard string) bool {
	t.Helper()
	mu.Lock()
	told := slices.Clone(*asked)
	mu.Unlock()
	ok := true
	if len(told) != 1 || told[0] != shard {
		t.Errorf("OnHandoff called with %v, want [%s] (the hand-off started)", told, shard)
		ok = false
	}
	if _, lost := w.events(); len(lost) != 0 {
		t.Errorf("%s reported %v lost; the lease was given back to it", w.c.WorkerID(), lost)
		ok = false
	}
	return ok
}

// scanNow runs a take cycle of w that scans the table, as a cycle after a
// request does, delivers its events and returns shard's hold then.
func (w *worker) scanNow(ctx context.Context, shard string) Hold {
	w.c.mu.Lock()
	w.c.needScan = true
	w.c.mu.Unlock()
	w.c.takeCycle(ctx)
	w.c.deliver()
	return w.c.HoldOf(shard)
}
