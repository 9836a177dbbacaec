package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// TestRecordErrorsNotRetried: a batch whose function returns RecordErrors
// is not tried again (the records it names are refused at every try): with
// Quarantine they are set aside at once, and the call on the others is
// tried again as Retry says, so that a failure a retry heals (here, once)
// does not quarantine them; without Quarantine Run fails after one call.
// Before, the whole batch went through the output's retries first (3
// calls refused the same way, a WARN and a wait each), and the call on the
// others was made once: its failure quarantined every good record.
func TestRecordErrorsNotRetried(t *testing.T) {
	bad := shardRec{0, 0}
	errFlaky := errors.New("timeout")
	// run runs 5 records through an output whose function refuses bad and
	// fails its first call without bad, and returns the calls with bad,
	// the records output and Run's error.
	run := func(t *testing.T, opts ...Option) (withBad int, seen map[shardRec]int, err error) {
		p, src := newMemoryPipeline(t, Config{}, 1)
		seen = map[shardRec]int{}
		flaked := false
		ForEachBatch(From(p, src), func(_ context.Context, b *batch.Batch[shardRec]) error {
			i := 0
			for v := range b.All() {
				if v == bad {
					withBad++
					return &RecordErrors{Errs: map[int]error{i: errRefused}}
				}
				i++
			}
			if !flaked && b.Len() > 0 {
				flaked = true
				return errFlaky
			}
			for v := range b.All() {
				seen[v]++
			}
			return nil
		}, opts...)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		for i := range 5 { // one batch
			if err := src.Push(shardRec{0, i}); err != nil {
				t.Fatalf("Push: %v", err)
			}
		}
		if err := p.Drain(context.Background()); err != nil {
			t.Fatalf("Drain: %v", err)
		}
		err = <-errc
		return withBad, seen, err
	}
	synctest.Test(t, func(t *testing.T) {
		box := &letterBox{}
		withBad, seen, err := run(t, Quarantine(box), Retry(3))
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		if withBad != 1 {
			t.Errorf("the batch with the refused record was called %d times, want 1", withBad)
		}
		if diff := cmp.Diff(map[shardRec]int{{0, 1}: 1, {0, 2}: 1, {0, 3}: 1, {0, 4}: 1}, seen); diff != "" {
			t.Errorf("records output (-want +got):\n%s", diff)
		}
		if l := box.all(); len(l) != 1 || l[0].Err != errRefused.Error() {
			t.Errorf("letters %v, want one, of the refused record", l)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		withBad, _, err := run(t, Retry(3))
		if !errors.Is(err, errRefused) || withBad != 1 {
			t.Errorf("without Quarantine: Run = %v after %d calls with the refused record, want it refused after 1", err, withBad)
		}
	})
}

// TestRecordErrorsCallAgainStopped: a Run stopped while the function is
// called again without the record it refused quarantines that record
// alone: the others, which no call failed on, are not set aside with the
// Run's context error (a DeadLetters that does not check its context
// takes what it is given).
func TestRecordErrorsCallAgainStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := shardRec{0, 0}
		p, src := newMemoryPipeline(t, Config{}, 1)
		box := &letterBox{}
		again := make(chan struct{})
		ForEachBatch(From(p, src), func(ctx context.Context, b *batch.Batch[shardRec]) error {
			i := 0
			for v := range b.All() {
				if v == bad {
					return &RecordErrors{Errs: map[int]error{i: errRefused}}
				}
				i++
			}
			close(again)
			<-ctx.Done()
			return ctx.Err()
		}, Quarantine(box), Retry(3))
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		for i := range 5 { // one batch
			if err := src.Push(shardRec{0, i}); err != nil {
				t.Fatalf("Push: %v", err)
			}
		}
		<-again
		cancel()
		<-errc
		for _, l := range box.all() {
			if l.Err != errRefused.Error() {
				t.Errorf("letter %s (%s): want only the refused record's", l.Record, l.Err)
			}
		}
	})
}

// TestTransformRecordErrorsRetried: an error of a Transform's function is
// the batch's, which the outputs try again (Retry), whatever it wraps: a
// RecordErrors names records of the Transform's batch, not of the output's,
// and the output's function did not return it. It failed Run at once.
func TestTransformRecordErrorsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, src := newMemoryPipeline(t, Config{}, 1)
		failed := false
		tr := Transform(From(p, src), func(_ context.Context, b *batch.Batch[shardRec]) (*batch.Batch[shardRec], error) {
			if !failed && b.Len() > 0 {
				failed = true
				return nil, fmt.Errorf("enrich: %w", &RecordErrors{Errs: map[int]error{0: errRefused}})
			}
			return b, nil
		})
		seen := 0
		ForEachBatch(tr, func(_ context.Context, b *batch.Batch[shardRec]) error {
			seen += b.Len()
			return nil
		}, Retry(2))
		if err := runMemory(t, p, src, 1, 5); err != nil {
			t.Fatalf("Run = %v, want nil: the Transform's failure tried again", err)
		}
		if seen != 5 {
			t.Errorf("%d records output, want 5", seen)
		}
	})
}

// TestRecordErrorsNilError: a RecordErrors whose record's error is nil
// still says which record it refuses, and fails Run without Quarantine
// with an error that can be printed. Its Error panicked.
func TestRecordErrorsNilError(t *testing.T) {
	e := &RecordErrors{Errs: map[int]error{3: nil}}
	if msg := e.Error(); !strings.Contains(msg, "3") {
		t.Errorf("Error() = %q, want record 3 named", msg)
	}
	synctest.Test(t, func(t *testing.T) {
		p, src := newMemoryPipeline(t, Config{}, 1)
		ForEachBatch(From(p, src), func(_ context.Context, b *batch.Batch[shardRec]) error {
			return &RecordErrors{Errs: map[int]error{0: nil}}
		}, Retry(0))
		err := runMemory(t, p, src, 1, 5)
		if err == nil || !strings.Contains(err.Error(), "record 0") {
			t.Errorf("Run = %v, want the refusal of record 0", err)
		}
	})
}
