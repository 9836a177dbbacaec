package stream_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/stream/internal/recoverycheck"
)

// TestFailureRecoveryCrashAgain crashes a pipeline with batches queued,
// then crashes its restart at an append of each kind while it runs the
// recovered batches (blocks pushed meanwhile are logged without a batch,
// and allocated by an entry) and records come in bursts between idle
// periods (reservations), then lets a third run drain. Across the three
// runs: a batch run twice has the same blocks, ranges and records (G2); no
// batch the log holds completed runs again (G3); every record is in
// exactly one completed batch (G1), and the completed batches, in time
// order, give each shard's records in the order they were produced.
func TestFailureRecoveryCrashAgain(t *testing.T) {
	for _, c := range []struct {
		kind    recoverylog.Kind
		n, keep int
	}{
		// The first block logged in a batch after blocks logged
		// without one, before the batch's allocation: the one entry
		// that puts those blocks in it.
		{kindTaggedAfterUntagged, 1, 1},
		{recoverylog.KindBlockStored, 3, 0},
		{recoverylog.KindBlockStored, 3, 1},
		{recoverylog.KindBatchAllocated, 1, 0},
		{recoverylog.KindBatchAllocated, 1, 1},
		{recoverylog.KindBatchCompleted, 2, 0},
		{recoverylog.KindBatchCompleted, 2, 1},
		{recoverylog.KindBatchesReserved, 1, 1},
	} {
		t.Run(fmt.Sprintf("%s %d keep %d", c.kind, c.n, c.keep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testFailureRecoveryCrashAgain(t, c.kind, c.n, c.keep) })
		})
	}
}

// kindTaggedAfterUntagged names, for TestFailureRecoveryCrashAgain, the
// crash of taggedAfterUntagged.
const kindTaggedAfterUntagged recoverylog.Kind = "block stored in a batch after blocks stored without one"

// taggedAfterUntagged returns an append hook that fails the first append of
// a block stored in a batch (Entry.Batch) that follows, in the run, one of
// a block stored without a batch, keeping keep of its entries, and stops
// the run.
func taggedAfterUntagged(keep int, stop func()) recoverylog.AppendHook {
	untagged := map[batch.BlockID]bool{} // logged without a batch, in none yet
	done := false
	return func(_ int, entries []recoverylog.Entry) recoverylog.Fault {
		e := entries[0]
		switch {
		case done:
		case e.Kind == recoverylog.KindBatchAllocated:
			for _, id := range e.Blocks {
				delete(untagged, id)
			}
		case e.Kind != recoverylog.KindBlockStored:
		case e.Batch == 0:
			untagged[e.Block.ID] = true
		case len(untagged) > 0:
			done = true
			stop()
			return recoverylog.Fault{Err: errCrash, Keep: keep}
		}
		return recoverylog.Fault{}
	}
}

func testFailureRecoveryCrashAgain(t *testing.T, kind recoverylog.Kind, n, keep int) {
	d := &durable{log: recoverylog.NewMemory(), out: t.TempDir()}
	var runs []*recoverycheck.Recorder
	var states []*recoverylog.State
	after := func() {
		t.Helper()
		d.log.SetAppendHook(nil)
		st, err := recoverylog.Recover(d.log.Entries())
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
	}
	errc := make(chan error, 1)

	// Run 1: slow outputs, so that batches queue; stopped in an output.
	rl := recoverycheck.NewRecorder()
	runs = append(runs, rl)
	var p1 *stream.Pipeline
	p1, src := pipeline(t, d, rl, hooks{out: func(ctx context.Context, i, cnt int, _ *batch.Batch[string]) error {
		time.Sleep(1500 * time.Millisecond)
		if i == 0 && cnt == 6 {
			p1.Stop()
			return ctx.Err()
		}
		return nil
	}})
	go func() { errc <- p1.Run(t.Context()) }()
	time.Sleep(300 * time.Millisecond)
	if err := produceUntil(d, src, 120, errc); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	after()
	if len(states[0].Pending) == 0 {
		t.Fatal("the first run left no batch pending: the test does not test")
	}

	// Run 2: crashed at the n-th append of kind; two batches may wait, so
	// that the recovered ones queue while blocks are pushed, which are
	// logged without a batch.
	rl = recoverycheck.NewRecorder()
	runs = append(runs, rl)
	var p2 *stream.Pipeline
	stop2 := func() { p2.Stop() }
	if kind == kindTaggedAfterUntagged {
		d.log.SetAppendHook(taggedAfterUntagged(keep, stop2))
	} else {
		d.log.SetAppendHook(nthAppend(kind, n, keep, stop2))
	}
	p2, src = pipeline(t, d, rl, hooks{maxPending: 2, out: func(context.Context, int, int, *batch.Batch[string]) error {
		time.Sleep(300 * time.Millisecond)
		return nil
	}})
	go func() { errc <- p2.Run(t.Context()) }()
	pushes, every := 12, 150*time.Millisecond
	if kind == kindTaggedAfterUntagged {
		// Pushing, within the limit of unbatched blocks, when the last
		// recovered batch is queued and the first batch cut an interval
		// later.
		pushes, every = 40, 450*time.Millisecond
	}
	if err := produceBurstsOf(d, src, pushes, every, 13*time.Second, errc); err != nil && !errors.Is(err, errCrash) {
		p2.Stop()
		<-errc
		t.Fatalf("second Run: %v", err)
	}
	after()

	// Run 3: drains.
	rl = recoverycheck.NewRecorder()
	runs = append(runs, rl)
	p3, src := pipeline(t, d, rl, hooks{})
	go func() { errc <- p3.Run(t.Context()) }()
	for range 5 {
		src.produce(d.record(), d.record())
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	p3.Drain(context.Background())
	if err := <-errc; err != nil {
		t.Fatalf("third Run: %v", err)
	}
	after()
	if st := states[2]; len(st.Pending)+len(st.Unallocated) > 0 {
		t.Errorf("after the drain the log holds %d pending batches, %d unallocated blocks", len(st.Pending), len(st.Unallocated))
	}

	var got []string
	completed := map[batch.Time]recoverycheck.Seen{}
	seen := map[batch.Time]recoverycheck.Seen{}
	doneIn := map[batch.Time]int{} // run, from 1, after which the log held the batch completed
	for i, rl := range runs {
		for tm, s := range rl.Saw() {
			s.Recovered = false
			if old, ok := seen[tm]; ok {
				if diff := cmp.Diff(old, s, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("batch %v in run %d differs from an earlier run's (-old +new):\n%s", tm, i+1, diff)
				}
				if r, ok := doneIn[tm]; ok {
					t.Errorf("batch %v completed in run %d, run again in run %d", tm, r, i+1)
				}
			}
			seen[tm] = s
			pending := slices.ContainsFunc(states[i].Pending, func(p recoverylog.PendingBatch) bool { return p.Time == tm })
			if _, ok := doneIn[tm]; !ok && !pending {
				doneIn[tm] = i + 1
				got = append(got, s.Records...)
				completed[tm] = s
			}
		}
	}
	var produced []string
	for _, c := range d.calls {
		produced = append(produced, c...)
	}
	for _, err := range shardOrder(completed) {
		t.Error(err)
	}
	slices.Sort(got)
	slices.Sort(produced)
	if diff := cmp.Diff(produced, got); diff != "" {
		t.Errorf("records of completed batches (-produced +got):\n%s", diff)
	}
}

// shardOrder checks that the completed batches, in time order, give each
// shard's records in the order they were produced (rN, N increasing), as a
// source delivers them: a block read before another is in an earlier batch
// or earlier in the same one. It returns a violation per record out of
// order.
func shardOrder(completed map[batch.Time]recoverycheck.Seen) []error {
	var errs []error
	last := map[string]int{}
	for _, tm := range slices.Sorted(maps.Keys(completed)) {
		s := completed[tm]
		off := 0
		for _, rg := range s.Ranges {
			for _, r := range s.Records[off : off+rg.Count] {
				n, err := strconv.Atoi(strings.TrimPrefix(r, "r"))
				if err != nil {
					errs = append(errs, fmt.Errorf("batch %v: record %q: %w", tm, r, err))
					continue
				}
				if l, ok := last[rg.Shard]; ok && n <= l {
					errs = append(errs, fmt.Errorf("batch %v: shard %s: record r%d after r%d: out of order", tm, rg.Shard, n, l))
				}
				last[rg.Shard] = n
			}
			off += rg.Count
		}
	}
	return errs
}
