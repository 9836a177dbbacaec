// Package logtest holds the entries, helpers and conformance cases with
// which the tests of weir's recovery logs check them through the driver's
// view (recoverylog.Log): what a backend stores, compacted, reopened,
// concurrently appended, with snapshots. Package recoverytest runs the
// cases against any backend.
package logtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
)

// Run runs the cases, each in its own subtest with its own store from
// newStore, which the case opens once or more, closing each log before
// opening the next.
func Run(t *testing.T, newStore func(t *testing.T) recovery.Opener) {
	cases := []struct {
		name string
		run  func(t *testing.T, o recovery.Opener)
	}{
		{"RoundTrip", testRoundTrip},
		{"Reopen", testReopen},
		{"Compact", testCompact},
		{"CompactEmpty", testCompactEmpty},
		{"CompactInconsistent", testCompactInconsistent},
		{"ConcurrentAppends", testConcurrentAppends},
		{"InvalidEntry", testInvalidEntry},
		{"CanceledContext", testCanceledContext},
		{"Closed", testClosed},
		{"Snapshots", testSnapshots},
		{"EmptyRuns", testEmptyRuns},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore(t)) })
	}
}

// EquateEmpty returns the cmp option the suite compares entries and states
// with: a nil and an empty slice or map are equal, as the encoding does not
// tell them apart.
func EquateEmpty() cmp.Option { return cmpopts.EquateEmpty() }

// Block returns a stored-block entry of source src and sequence seq with one
// range on shard "shard-<src>" of stream "s", made up from seq.
func Block(src int, seq uint64) recoverylog.Entry { return BlockIn(src, seq, 0) }

// BlockIn returns Block's entry logged in the batch at t
// (recoverylog.BlockStoredIn).
func BlockIn(src int, seq uint64, t batch.Time) recoverylog.Entry {
	first := fmt.Sprint(seq*100 + 1)
	last := fmt.Sprint(seq*100 + 10)
	return recoverylog.BlockStoredIn(batch.BlockInfo{
		ID:     batch.BlockID{Source: src, Seq: seq},
		Ranges: []batch.SeqRange{{Stream: "s", Shard: fmt.Sprint("shard-", src), First: first, Last: last, Count: 10}},
		Count:  10,
	}, t)
}

// ID returns the block ID of source src and sequence seq.
func ID(src int, seq uint64) batch.BlockID { return batch.BlockID{Source: src, Seq: seq} }

// SampleShape returns a pipeline shape with two sources and two outputs.
func SampleShape() recovery.Shape {
	return recovery.Shape{
		Sources: []recovery.Component{{Kind: "kinesis", Name: "words"}, {Kind: "memory"}},
		Outputs: []recovery.Component{{Kind: "ForEachBatch", Name: "files"}, {Kind: "Print"}},
	}
}

// History returns a log of every kind of entry: a shape, blocks, two
// completed batches and one pending, and one unallocated block.
func History() []recoverylog.Entry {
	return []recoverylog.Entry{
		recoverylog.ShapeRecorded(SampleShape()),
		Block(0, 0), Block(1, 0),
		recoverylog.BatchAllocated(1000, ID(0, 0), ID(1, 0)),
		Block(0, 1),
		recoverylog.BatchCompleted(1000),
		recoverylog.BatchAllocated(2000, ID(0, 1)),
		Block(0, 2), Block(1, 1),
		recoverylog.BatchCompleted(2000),
		recoverylog.BatchAllocated(3000, ID(1, 1)),
		Block(0, 3),
		recoverylog.BatchAllocated(4000),
		recoverylog.BatchCompleted(4000),
		recoverylog.BatchesReserved(14000),
		{Kind: recoverylog.KindSummary, Summary: recoverylog.Progress{
			ShardSeqs: map[recoverylog.ShardKey]string{{Stream: "t", Shard: "x"}: "12345678901234567890123"},
		}},
	}
}

// Open opens o's log through the driver's view, closing it at the end of
// the test.
func Open(t *testing.T, o recovery.Opener) *recoverylog.Log {
	t.Helper()
	l, err := recoverylog.Open(t.Context(), o, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// MustAppend appends entries to l, failing t if it cannot.
func MustAppend(t *testing.T, l *recoverylog.Log, entries ...recoverylog.Entry) {
	t.Helper()
	if err := l.Append(t.Context(), entries...); err != nil {
		t.Fatalf("Append(%v): %v", entries, err)
	}
}

// Check reads l and compares its entries with want, failing t on a
// difference.
func Check(t *testing.T, l *recoverylog.Log, want []recoverylog.Entry) {
	t.Helper()
	got, err := l.Read(t.Context())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff(want, got, EquateEmpty()); diff != "" {
		t.Fatalf("Read entries mismatch (-want +got):\n%s", diff)
	}
}

func closeLog(t *testing.T, l *recoverylog.Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func testRoundTrip(t *testing.T, o recovery.Opener) {
	l := Open(t, o)
	Check(t, l, nil)
	h := History()
	MustAppend(t, l, h[:3]...)
	for _, e := range h[3:] {
		MustAppend(t, l, e)
	}
	MustAppend(t, l)
	Check(t, l, h)
}

func testReopen(t *testing.T, o recovery.Opener) {
	h := History()
	l := Open(t, o)
	MustAppend(t, l, h[:6]...)
	closeLog(t, l)
	l = Open(t, o)
	Check(t, l, h[:6])
	MustAppend(t, l, h[6:]...)
	closeLog(t, l)
	l = Open(t, o)
	Check(t, l, h)
}

func testCompact(t *testing.T, o recovery.Opener) {
	h := History()
	before, err := recoverylog.Recover(h)
	if err != nil {
		t.Fatalf("Recover(History()): %v", err)
	}
	want := before.Entries()
	l := Open(t, o)
	MustAppend(t, l, h...)
	if err := l.Compact(t.Context()); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	Check(t, l, want)
	got, err := recoverylog.Load(t.Context(), l)
	if err != nil {
		t.Fatalf("Load after Compact: %v", err)
	}
	if diff := cmp.Diff(before, got, EquateEmpty()); diff != "" {
		t.Fatalf("State after Compact mismatch (-want +got):\n%s", diff)
	}
	// Appends go on after compaction, compaction is idempotent, and both
	// survive a reopen.
	more := []recoverylog.Entry{recoverylog.BatchCompleted(3000), Block(1, 2)}
	MustAppend(t, l, more...)
	Check(t, l, append(want, more...))
	closeLog(t, l)
	l = Open(t, o)
	Check(t, l, append(want, more...))
	for range 2 {
		if err := l.Compact(t.Context()); err != nil {
			t.Fatalf("Compact: %v", err)
		}
	}
	after, err := recoverylog.Recover(append(h, more...))
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	closeLog(t, l)
	l = Open(t, o)
	Check(t, l, after.Entries())
}

func testCompactEmpty(t *testing.T, o recovery.Opener) {
	l := Open(t, o)
	if err := l.Compact(t.Context()); err != nil {
		t.Fatalf("Compact of an empty log: %v", err)
	}
	Check(t, l, nil)
	MustAppend(t, l, Block(0, 0))
	Check(t, l, []recoverylog.Entry{Block(0, 0)})
}

func testCompactInconsistent(t *testing.T, o recovery.Opener) {
	l := Open(t, o)
	bad := []recoverylog.Entry{Block(0, 0), recoverylog.BatchCompleted(1000)}
	MustAppend(t, l, bad...)
	if err := l.Compact(t.Context()); !errors.Is(err, recovery.ErrInconsistent) {
		t.Fatalf("Compact of an inconsistent log: got %v, want ErrInconsistent", err)
	}
	Check(t, l, bad)
}

// testConcurrentAppends appends pairs of entries from several goroutines
// and checks each pair stays together and each goroutine's pairs stay in
// order.
func testConcurrentAppends(t *testing.T, o recovery.Opener) {
	const writers, pairs = 4, 5
	l := Open(t, o)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range uint64(pairs) {
				if err := l.Append(context.Background(), Block(w, i), recoverylog.BatchAllocated(batch.Time(w*1000+int(i)), ID(w, i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Append: %v", err)
	}
	got, err := l.Read(t.Context())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(got) != 2*writers*pairs {
		t.Fatalf("Read %d entries, want %d", len(got), 2*writers*pairs)
	}
	next := make([]uint64, writers)
	for i := 0; i < len(got); i += 2 {
		id := got[i].Block.ID
		want := []recoverylog.Entry{Block(id.Source, next[id.Source]),
			recoverylog.BatchAllocated(batch.Time(id.Source*1000+int(next[id.Source])), ID(id.Source, next[id.Source]))}
		if diff := cmp.Diff(want, got[i:i+2], EquateEmpty()); diff != "" {
			t.Fatalf("entries %d and %d mismatch (-want +got):\n%s", i, i+1, diff)
		}
		next[id.Source]++
	}
}

func testInvalidEntry(t *testing.T, o recovery.Opener) {
	l := Open(t, o)
	err := l.Append(t.Context(), Block(0, 0), recoverylog.Entry{Kind: "bogus"})
	if !errors.Is(err, recoverylog.ErrInvalidEntry) {
		t.Fatalf("Append of an invalid entry: got %v, want ErrInvalidEntry", err)
	}
	Check(t, l, nil)
}

func testCanceledContext(t *testing.T, o recovery.Opener) {
	l := Open(t, o)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Append(ctx, Block(0, 0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a canceled context: got %v, want context.Canceled", err)
	}
	Check(t, l, nil)
}

func testClosed(t *testing.T, o recovery.Opener) {
	l := Open(t, o)
	MustAppend(t, l, Block(0, 0))
	closeLog(t, l)
	closeLog(t, l)
	ctx := t.Context()
	if err := l.Append(ctx, Block(0, 1)); !errors.Is(err, recovery.ErrClosed) {
		t.Errorf("Append after Close: got %v, want ErrClosed", err)
	}
	if _, err := l.Read(ctx); !errors.Is(err, recovery.ErrClosed) {
		t.Errorf("Read after Close: got %v, want ErrClosed", err)
	}
	if err := l.Compact(ctx); !errors.Is(err, recovery.ErrClosed) {
		t.Errorf("Compact after Close: got %v, want ErrClosed", err)
	}
	l = Open(t, o)
	Check(t, l, []recoverylog.Entry{Block(0, 0)})
}

// StateHistory returns a log with a state snapshot: batches 1000 and 2000
// completed, the snapshot after 1000, batch 3000 completed and 4000
// pending. A restart replays 2000 and 3000 on the snapshot.
func StateHistory(ref string) []recoverylog.Entry {
	return []recoverylog.Entry{
		recoverylog.ShapeRecorded(SampleShape()),
		recoverylog.SnapshotTaken(0, ""),
		Block(0, 0), recoverylog.BatchAllocated(1000, ID(0, 0)), recoverylog.BatchCompleted(1000),
		Block(0, 1), recoverylog.BatchAllocated(2000, ID(0, 1)), recoverylog.BatchCompleted(2000),
		recoverylog.SnapshotTaken(1000, ref),
		Block(1, 0), recoverylog.BatchAllocated(3000, ID(1, 0)), recoverylog.BatchCompleted(3000),
		Block(0, 2), recoverylog.BatchAllocated(4000, ID(0, 2)),
	}
}

// RunHistory is StateHistory with its batch at 4000 completed, then a
// stateful pipeline's runs of empty batches (recoverylog.EmptyRun): one
// from 5000 through 15000 every second, in which a batch with a block
// completed at 7000, and one from 21000 through 31000 every 5 s, in which
// a batch with a block is pending at 26000.
func RunHistory(ref string) []recoverylog.Entry {
	return append(StateHistory(ref), recoverylog.BatchCompleted(4000),
		recoverylog.EmptyRun(5000, 15000, time.Second), BlockIn(1, 1, 7000), recoverylog.BatchCompleted(7000),
		recoverylog.EmptyRun(21000, 31000, 5*time.Second), BlockIn(0, 3, 26000))
}

// testSnapshots stores snapshots, reads them back after a reopen, checks
// that compaction keeps the batches to replay after the current snapshot
// and the snapshot itself, and removes the older ones.
func testSnapshots(t *testing.T, o recovery.Opener) {
	l := Open(t, o)
	if !l.KeepsSnapshots() {
		t.Skipf("%T does not implement recovery.SnapshotStore: its pipelines cannot keep state across restarts", l.Store())
	}
	ctx := t.Context()
	big := make([]byte, 1<<20+17) // more than one chunk of a chunked store
	for i := range big {
		big[i] = byte(i * 7)
	}
	old, err := l.PutSnapshot(ctx, 500, []byte("old"))
	if err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	ref, err := l.PutSnapshot(ctx, 1000, big)
	if err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	if _, err := l.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 1000, Ref: ref + "x"}); !errors.Is(err, recovery.ErrNoSnapshot) {
		t.Errorf("GetSnapshot of an unknown reference: got %v, want ErrNoSnapshot", err)
	}
	h := StateHistory(ref)
	h[1] = recoverylog.SnapshotTaken(500, old)
	MustAppend(t, l, h...)
	closeLog(t, l)

	l = Open(t, o)
	got, err := l.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 1000, Ref: ref})
	if err != nil {
		t.Fatalf("GetSnapshot after reopen: %v", err)
	}
	if !bytesEqual(got, big) {
		t.Fatalf("GetSnapshot: got %d bytes, not the %d put", len(got), len(big))
	}
	st, err := recoverylog.Load(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	want := &recoverylog.SnapshotRef{Time: 1000, Ref: ref}
	if diff := cmp.Diff(want, st.Snapshot); diff != "" {
		t.Errorf("Snapshot (-want +got):\n%s", diff)
	}
	var replay []batch.Time
	for _, p := range st.Replay {
		replay = append(replay, p.Time)
	}
	if diff := cmp.Diff([]batch.Time{2000, 3000}, replay); diff != "" {
		t.Errorf("Replay (-want +got):\n%s", diff)
	}
	if err := l.Compact(ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	after, err := recoverylog.Load(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, after, EquateEmpty()); diff != "" {
		t.Errorf("State after Compact (-want +got):\n%s", diff)
	}
	if _, err := l.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 1000, Ref: ref}); err != nil {
		t.Errorf("the current snapshot after Compact: %v", err)
	}
	if _, err := l.GetSnapshot(ctx, recoverylog.SnapshotRef{Time: 500, Ref: old}); !errors.Is(err, recovery.ErrNoSnapshot) {
		t.Errorf("an older snapshot after Compact: got %v, want ErrNoSnapshot (removed)", err)
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// testEmptyRuns stores runs of empty batches (version-4 entries) among
// batches with blocks, reads them back after a reopen, compacts the log,
// then compacts it releasing the times after the batch at 3400 with the
// empty batches completed through it, as a stopping driver does: each time
// the log, reopened, recovers to the state of the entries it was given.
func testEmptyRuns(t *testing.T, o recovery.Opener) {
	h := RunHistory("r")
	l := Open(t, o)
	MustAppend(t, l, h...)
	closeLog(t, l)
	l = Open(t, o)
	Check(t, l, h)
	check := func(when string, want *recoverylog.State) {
		t.Helper()
		got, err := recoverylog.Load(t.Context(), l)
		if err != nil {
			t.Fatalf("Load %s: %v", when, err)
		}
		if diff := cmp.Diff(want, got, EquateEmpty()); diff != "" {
			t.Fatalf("State %s (-want +got):\n%s", when, diff)
		}
	}
	before, err := recoverylog.Recover(h)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if len(before.Runs) != 2 || len(before.Pending) != 3 {
		t.Fatalf("the history recovers to runs %v, pending %v; want 2 runs, and pending the batches at 21000 (empty), 26000 (a block) and 31000 (empty)",
			before.Runs, before.Pending)
	}
	if err := l.Compact(t.Context()); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	closeLog(t, l)
	l = Open(t, o)
	Check(t, l, before.Entries())
	check("after Compact", before)

	// Stopping after the batch at 26000, whose completion is logged, and
	// the empty one at 31000 left unrun: nothing is left to run but 31000.
	MustAppend(t, l, recoverylog.BatchCompleted(26000))
	if err := l.CompactReleasing(t.Context(), 31000, 26000); err != nil {
		t.Fatalf("CompactReleasing: %v", err)
	}
	closeLog(t, l)
	l = Open(t, o)
	after, err := recoverylog.Load(t.Context(), l)
	if err != nil {
		t.Fatalf("Load after CompactReleasing: %v", err)
	}
	var pending []batch.Time
	for _, p := range after.Pending {
		pending = append(pending, p.Time)
	}
	if diff := cmp.Diff([]batch.Time{31000}, pending); diff != "" {
		t.Errorf("pending after CompactReleasing (-want +got):\n%s", diff)
	}
	if last, ok := after.LastBatch(); !ok || last != 31000 {
		t.Errorf("LastBatch after CompactReleasing: %v %v, want 31000", last, ok)
	}
	again, err := recoverylog.Recover(after.Entries())
	if err != nil {
		t.Fatalf("Recover(Entries()) after CompactReleasing: %v", err)
	}
	if diff := cmp.Diff(after, again, EquateEmpty()); diff != "" {
		t.Errorf("State of Entries() after CompactReleasing (-want +got):\n%s", diff)
	}
}
