package dynamodb_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/sink/deadletter/dynamodb"
	sinkddb "github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/stream"
)

// TestFleetSameBatchTime quarantines, as two workers of a fleet do, letters
// of the same batch time, output and indexes, read from different shards
// (each worker holds its own shards' leases), into one table: Letters
// returns every letter of both workers, and each worker's batch
// recomputed after a crash writes nothing more.
func TestFleetSameBatchTime(t *testing.T) {
	tab, c, name := newTable(t)
	other, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	a := []stream.DeadLetter{letter(0, "a0"), letter(1, "a1")}
	b := []stream.DeadLetter{letter(0, "b0"), letter(1, "b1")}
	for i := range b {
		b[i].Range.Shard = "shardId-000000000002"
	}
	for _, w := range []struct {
		tab *dynamodb.Table
		ls  []stream.DeadLetter
	}{{tab, a}, {other, b}, {tab, a}, {other, b}} {
		if err := w.tab.Quarantine(t.Context(), w.ls); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tab.Letters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []stream.DeadLetter{a[0], b[0], a[1], b[1]}
	if diff := cmp.Diff(want, got, cmp.Comparer(bytes.Equal)); diff != "" {
		t.Errorf("letters of two workers' batches of the same time (-want +got):\n%s", diff)
	}
}

// TestFleetLettersWithoutRange quarantines, from the output of a pipeline
// sharing its shards with other workers, letters without a source range
// (as ForEachBatch without origins quarantines) of the same batch time,
// output and indexes through two Tables, two workers: Letters returns all
// of them, and each worker's letters quarantined again (a batch
// recomputed) are not doubled.
func TestFleetLettersWithoutRange(t *testing.T) {
	tab, c, name := newTable(t)
	other, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	a := []stream.DeadLetter{rangeless(0, "a0"), rangeless(1, "a1")}
	b := []stream.DeadLetter{rangeless(0, "b0")}
	letterstest.OnFleet(t, func(ctx context.Context) error {
		for _, w := range []struct {
			tab *dynamodb.Table
			ls  []stream.DeadLetter
		}{{tab, a}, {other, b}, {tab, a}, {other, b}} {
			if err := w.tab.Quarantine(ctx, w.ls); err != nil {
				return err
			}
		}
		return nil
	})
	checkTwoWriters(t, tab)
}
