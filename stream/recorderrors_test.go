package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

// errRefused is what the test's sink refuses records with.
var errRefused = errors.New("refused")

// TestQuarantineRecordErrors runs a ForEachBatch output, with Quarantine,
// whose function refuses records by returning RecordErrors, outputting
// nothing of such a call: the records of sequence number 3 modulo 10,
// and the record {2, 55} only in a call without those (so in the second
// call of its batch). Each refused record is quarantined alone, with its
// own error, and every other one output once.
func TestQuarantineRecordErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n = 4, 400
		late := shardRec{Shard: 2, Seq: 55}
		refused := func(v shardRec, first bool) bool { return v.Seq%10 == 3 || v == late && !first }
		p, src := newMemoryPipeline(t, Config{Parallelism: 4}, shards)
		seen := map[shardRec]int{}
		box := &letterBox{}
		ForEachBatch(From(p, src), func(_ context.Context, b *batch.Batch[shardRec]) error {
			first := true
			for v := range b.All() {
				first = first && !refused(v, true)
			}
			re := &RecordErrors{Errs: map[int]error{}}
			i := 0
			for v := range b.All() {
				if refused(v, first) {
					re.Errs[i] = fmt.Errorf("record %v: %w", v, errRefused)
				}
				i++
			}
			if len(re.Errs) > 0 {
				return fmt.Errorf("sink: %w", re)
			}
			for v := range b.All() {
				seen[v]++
			}
			return nil
		}, Quarantine(box), Retry(1))
		if err := runMemory(t, p, src, shards, n); err != nil {
			t.Fatalf("Run = %v, want nil: the refused records quarantined", err)
		}
		wantLetters := map[string]string{}
		for k := range n {
			v := shardRec{k % shards, k / shards}
			want := 1
			if refused(v, false) {
				want = 0
				rec, _ := json.Marshal(v)
				wantLetters[string(rec)] = fmt.Sprintf("record %v: refused", v)
			}
			if seen[v] != want {
				t.Errorf("record %v output %d times, want %d", v, seen[v], want)
			}
		}
		gotLetters := map[string]string{}
		for _, l := range box.all() {
			gotLetters[string(l.Record)] = l.Err
		}
		if diff := cmp.Diff(wantLetters, gotLetters); diff != "" {
			t.Errorf("letters, record to error (-want +got):\n%s", diff)
		}
	})
}

// TestQuarantineRecordErrorsOutOfRange: a RecordErrors naming a record the
// batch does not have names nothing the pass can set aside: the batch is
// quarantined whole, as for any error of the function.
func TestQuarantineRecordErrorsOutOfRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n = 1, 5
		p, src := newMemoryPipeline(t, Config{}, shards)
		box := &letterBox{}
		ForEachBatch(From(p, src), func(_ context.Context, b *batch.Batch[shardRec]) error {
			return &RecordErrors{Errs: map[int]error{b.Len(): errRefused}}
		}, Quarantine(box), Retry(0))
		if err := runMemory(t, p, src, shards, n); err != nil {
			t.Fatalf("Run = %v, want nil: the batches quarantined", err)
		}
		if got := len(box.all()); got != n {
			t.Errorf("%d letters, want %d: every record", got, n)
		}
	})
}

// TestWithoutKeepsOrigins: the batch without some records keeps the
// others' origins, in order, and their parts apart.
func TestWithoutKeepsOrigins(t *testing.T) {
	b := batch.New(7, nil, []int{0, 1, 2}, []int{3, 4}).WithOrigins([]batch.Origin{
		{Seq: "10"}, {Seq: "11"}, {Seq: "12"}, {Seq: "13"}, {Seq: "14"}})
	got := without(b, map[int]error{1: errRefused, 3: errRefused})
	if diff := cmp.Diff([][]int{{0, 2}, {4}}, got.Parts()); diff != "" {
		t.Errorf("parts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]batch.Origin{{Seq: "10"}, {Seq: "12"}, {Seq: "14"}}, got.Origins()); diff != "" {
		t.Errorf("origins (-want +got):\n%s", diff)
	}
	if got.Time() != 7 {
		t.Errorf("time %v, want 7", got.Time())
	}
}

// TestRecordErrorsMessage: one record's error is the error's message; for
// several, the count and the first by index; errors.Is sees each.
func TestRecordErrorsMessage(t *testing.T) {
	other := errors.New("other")
	one := &RecordErrors{Errs: map[int]error{4: errRefused}}
	if one.Error() != "refused" {
		t.Errorf("one record: %q", one.Error())
	}
	two := &RecordErrors{Errs: map[int]error{9: other, 2: errRefused}}
	if want := "2 records refused, the first: refused"; two.Error() != want {
		t.Errorf("two records: %q, want %q", two.Error(), want)
	}
	if !errors.Is(two, other) || !errors.Is(two, errRefused) {
		t.Errorf("errors.Is misses a record's error")
	}
}
