package dynamodb_test

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/internal/letters/lettertable"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/deadletter/dynamodb"
	sinkddb "github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/stream"
)

// rangeless returns letter(i, rec) without a source range, as
// ForEachBatch without origins quarantines it.
func rangeless(i int, rec string) stream.DeadLetter {
	l := letter(i, rec)
	l.Range, l.Offset = batch.SeqRange{}, 0
	return l
}

// checkTwoWriters checks that tab holds the letters a0, a1 of one writer
// (a worker, or a Run) and b0 of another, all of index 0 but a1, once
// each.
func checkTwoWriters(t *testing.T, tab *dynamodb.Table) {
	t.Helper()
	got, err := tab.Letters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Index 0 of both writers, in the order of their (random) names.
	if len(got) != 3 || got[2].Index != 1 || !bytes.Equal(got[2].Record, []byte("a1")) {
		t.Fatalf("letters: %d, want 3 (a0 and b0 in any order, then a1):\n%+v", len(got), got)
	}
	recs := map[string]bool{string(got[0].Record): true, string(got[1].Record): true}
	if !recs["a0"] || !recs["b0"] {
		t.Errorf("letters of index 0: %q and %q, want a0 and b0", got[0].Record, got[1].Record)
	}
}

// TestTimeReusedWithoutLog quarantines, from the outputs of two Runs of a
// pipeline on one worker without a recovery log (two Tables: the process
// restarted, its wall clock behind the first Run's batches), letters
// without a source range of the same batch time, output and indexes:
// Letters returns the letters of both Runs. Keyed by batch time alone, the
// second Run's were skipped as already applied, and lost. Each Run's
// letters quarantined again (an output retried) are not doubled.
func TestTimeReusedWithoutLog(t *testing.T) {
	tab, c, name := newTable(t)
	restarted, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	a := []stream.DeadLetter{rangeless(0, "a0"), rangeless(1, "a1")}
	b := []stream.DeadLetter{rangeless(0, "b0")}
	for _, run := range []struct {
		tab *dynamodb.Table
		ls  []stream.DeadLetter
	}{{tab, a}, {restarted, b}} {
		letterstest.OnPipeline(t, nil, func(ctx context.Context) error {
			for range 2 {
				if err := run.tab.Quarantine(ctx, run.ls); err != nil {
					return err
				}
			}
			return nil
		})
	}
	checkTwoWriters(t, tab)
}

// TestKeysWithLog quarantines letters without a source range from the
// output of a pipeline on one worker with a recovery log: their keys are
// "<batch time>-<output>/<fingerprint>" and 0, the IDs weir deadletters
// names them by, a fingerprint per record, which the letters of a batch
// recomputed after a restart (by another Table) have too.
func TestKeysWithLog(t *testing.T) {
	tab, c, name := newTable(t)
	restarted, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	ls := []stream.DeadLetter{rangeless(0, "a0"), rangeless(1, "a1")}
	for _, tb := range []*dynamodb.Table{tab, restarted} {
		letterstest.OnPipeline(t, recovery.Dir(t.TempDir()), func(ctx context.Context) error { return tb.Quarantine(ctx, ls) })
	}
	es, err := lettertable.Scan(t.Context(), c, name)
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`^1700000000000-1/[A-Z2-7]{16}-0$`)
	if len(es) != 2 || es[0].ID == es[1].ID {
		t.Fatalf("%d items, want 2 of distinct IDs: %+v", len(es), es)
	}
	for _, e := range es {
		if !id.MatchString(e.ID) {
			t.Errorf("ID %q, want %v", e.ID, id)
		}
	}
}

// TestRecomputedOtherLetters quarantines, from the output of a pipeline
// with a recovery log, a batch's letters without a source range (records
// A and B, as ForEachBatch without origins quarantines them), then,
// through another Table (the process restarted), the letters of the
// batch recomputed, which failed A and C (a flaky downstream): the table
// holds the letters of A, B and C, A once. Keyed by batch time and Index, C's letter had B's key
// and was skipped as already applied, and lost. Two letters of equal
// records (D) in a batch are two items, in each attempt the same two.
func TestRecomputedOtherLetters(t *testing.T) {
	tab, c, name := newTable(t)
	restarted, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	first := []stream.DeadLetter{rangeless(0, "A"), rangeless(1, "B"), rangeless(2, "D"), rangeless(3, "D")}
	again := []stream.DeadLetter{rangeless(0, "A"), rangeless(1, "C"), rangeless(2, "D"), rangeless(3, "D")}
	for _, run := range []struct {
		tab *dynamodb.Table
		ls  []stream.DeadLetter
	}{{tab, first}, {restarted, again}} {
		letterstest.OnPipeline(t, recovery.Dir(t.TempDir()), func(ctx context.Context) error { return run.tab.Quarantine(ctx, run.ls) })
	}
	got, err := tab.Letters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]int{}
	for _, l := range got {
		recs[string(l.Record)]++
	}
	if diff := cmp.Diff(map[string]int{"A": 1, "B": 1, "C": 1, "D": 2}, recs); diff != "" {
		t.Errorf("letters by record after a recomputation that failed other records (-want +got):\n%s", diff)
	}
}
