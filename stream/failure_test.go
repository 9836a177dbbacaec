package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/noretry"
)

// letterBox is a DeadLetters in memory: the letters of each call, by batch
// time and output, replaced by a later call for the same ones.
type letterBox struct {
	mu    sync.Mutex
	calls int
	byKey map[string][]DeadLetter
	err   error // returned by every call, after the letters are kept
}

func (b *letterBox) Quarantine(_ context.Context, letters []DeadLetter) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.byKey == nil {
		b.byKey = make(map[string][]DeadLetter)
	}
	b.byKey[fmt.Sprint(letters[0].Time, "/", letters[0].Output)] = letters
	return b.err
}

func (b *letterBox) all() []DeadLetter {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []DeadLetter
	for _, ls := range b.byKey {
		out = append(out, ls...)
	}
	return out
}

// policyCounts sums what the outputs' failure policies did, as the
// BatchCompleted events tell it.
type policyCounts struct {
	NopListener
	mu                   sync.Mutex
	retries, quarantined int
}

func (c *policyCounts) BatchCompleted(b BatchInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range b.Outputs {
		c.retries += o.Retries
		c.quarantined += o.Quarantined
	}
}

// TestQuarantineOneInTenThousand checks the failure policy's promise: a
// function that fails on one record in 10,000 quarantines exactly that
// record, with its origin, error and (for a panic) stack; every other
// record is output exactly once, those of its partition before it
// included; and Run goes on and returns nil.
func TestQuarantineOneInTenThousand(t *testing.T) {
	const shards, n = 4, 10000
	bad := shardRec{Shard: 1, Seq: 1080} // record 4321
	errBad := errors.New("bad record")
	tests := []struct {
		name  string
		build func(s *Stream[shardRec], out func(context.Context, shardRec) error, opts ...Option)
		panic bool
	}{
		{"Map panics", func(s *Stream[shardRec], out func(context.Context, shardRec) error, opts ...Option) {
			m := Map(s, func(v shardRec) shardRec {
				if v == bad {
					panic("kaboom")
				}
				return v
			})
			ForEach(m, out, opts...)
		}, true},
		{"Filter panics", func(s *Stream[shardRec], out func(context.Context, shardRec) error, opts ...Option) {
			f := Filter(s, func(v shardRec) bool {
				if v == bad {
					panic("kaboom")
				}
				return true
			})
			ForEach(f, out, opts...)
		}, true},
		{"ForEach errs", func(s *Stream[shardRec], out func(context.Context, shardRec) error, opts ...Option) {
			ForEach(s, func(ctx context.Context, v shardRec) error {
				if v == bad {
					return errBad
				}
				return out(ctx, v)
			}, opts...)
		}, false},
		{"ForEach panics", func(s *Stream[shardRec], out func(context.Context, shardRec) error, opts ...Option) {
			ForEach(s, func(ctx context.Context, v shardRec) error {
				if v == bad {
					panic("kaboom")
				}
				return out(ctx, v)
			}, opts...)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				counts := &policyCounts{}
				p, src := newMemoryPipeline(t, Config{Parallelism: 4, Listeners: []Listener{counts}}, shards)
				var mu sync.Mutex
				seen := make(map[shardRec]int)
				box := &letterBox{}
				tt.build(From(p, src), func(_ context.Context, v shardRec) error {
					mu.Lock()
					defer mu.Unlock()
					seen[v]++
					return nil
				}, Quarantine(box), Named("out"))
				if err := runMemory(t, p, src, shards, n); err != nil {
					t.Fatalf("Run = %v, want nil: the bad record quarantined", err)
				}
				for i := range n {
					v := shardRec{i % shards, i / shards}
					want := 1
					if v == bad {
						want = 0
					}
					if seen[v] != want {
						t.Errorf("record %v output %d times, want %d", v, seen[v], want)
					}
				}
				letters := box.all()
				if len(letters) != 1 {
					t.Fatalf("%d letters, want 1: %+v", len(letters), letters)
				}
				l := letters[0]
				want, _ := json.Marshal(bad)
				if string(l.Record) != string(want) || l.Encoding != "json" {
					t.Errorf("letter record %q (%s), want %q (json)", l.Record, l.Encoding, want)
				}
				// The memory source numbers a shard's records from 1, and
				// pushes each record alone: one range of one record.
				wantRange := batch.SeqRange{Stream: "memory", Shard: "shardId-000000000001", First: "1081", Last: "1081", Count: 1}
				if diff := cmp.Diff(wantRange, l.Range); diff != "" || l.Offset != 0 {
					t.Errorf("letter origin offset %d, range (-want +got):\n%s", l.Offset, diff)
				}
				if l.Time == 0 || l.Output != 0 || l.OutputName == "" || !strings.HasPrefix(l.OutputName, `ForEach("out")`) {
					t.Errorf("letter batch %v output %d %q, want a batch time and output 0, ForEach(\"out\")", l.Time, l.Output, l.OutputName)
				}
				if tt.panic {
					if l.Panic != "kaboom" || l.Err != "panic: kaboom" || !strings.Contains(l.Stack, "TestQuarantineOneInTenThousand") {
						t.Errorf("letter panic %q err %q, stack:\n%s\nwant the panic and the stack of the function", l.Panic, l.Err, l.Stack)
					}
				} else if l.Err != errBad.Error() || l.Panic != "" || l.Stack != "" {
					t.Errorf("letter err %q panic %q, want %q and no panic", l.Err, l.Panic, errBad)
				}
				counts.mu.Lock()
				defer counts.mu.Unlock()
				if counts.quarantined != 1 || counts.retries != DefaultRetries {
					t.Errorf("listener saw %d quarantined, %d retries; want 1, %d (one partition tried again)", counts.quarantined, counts.retries, DefaultRetries)
				}
			})
		})
	}
}

// TestRetryThenStop checks the default policy: a failing output is tried
// again DefaultRetries times, backing off (about 1s, 2s, 4s of the clock),
// then Run returns the *BatchError; Retry(0) stops at once.
func TestRetryThenStop(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opts      []Option
		tries     int
		minWait   time.Duration
		maxWait   time.Duration
		forEachOp bool
	}{
		{"ForEach default", nil, DefaultRetries + 1, 3500 * time.Millisecond, 7 * time.Second, true},
		{"ForEachBatch default", nil, DefaultRetries + 1, 3500 * time.Millisecond, 7 * time.Second, false},
		{"Retry(0)", []Option{Retry(0)}, 1, 0, 0, true},
		{"Retry(1)", []Option{Retry(1)}, 2, 500 * time.Millisecond, time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				p, r, s := newTest[string](t, Config{})
				boom := errors.New("boom")
				var tries []time.Time
				fail := func(v string) error {
					if v != "bad" {
						return nil
					}
					tries = append(tries, time.Now())
					return boom
				}
				addFailing(s, tt.forEachOp, fail, tt.opts...)
				err := feed(t, p, r, [][]string{{"ok"}, {"bad"}})
				be, ok := errors.AsType[*BatchError](err)
				if !ok || !errors.Is(err, boom) {
					t.Fatalf("Run = %v, want a *BatchError wrapping boom", err)
				}
				if want := batch.TimeOf(time.Unix(946684802, 0)); be.Time != want {
					t.Errorf("BatchError.Time = %v, want %v", be.Time, want)
				}
				if len(tries) != tt.tries {
					t.Fatalf("tried %d times, want %d", len(tries), tt.tries)
				}
				if waited := tries[len(tries)-1].Sub(tries[0]); waited < tt.minWait || waited > tt.maxWait {
					t.Errorf("the tries took %v of the clock, want %v to %v", waited, tt.minWait, tt.maxWait)
				}
			})
		})
	}
}

// TestRetryResumesForEach checks that a ForEach partition tried again
// resumes after the records f accepted: a transient failure outputs every
// record once, and Run goes on.
func TestRetryResumesForEach(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		var got []string
		failures := 2
		ForEach(s, func(_ context.Context, v string) error {
			if v == "c" && failures > 0 {
				failures--
				return errors.New("not now")
			}
			got = append(got, v)
			return nil
		})
		if err := feed(t, p, r, [][]string{{"a", "b", "c", "d"}}); err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		if diff := cmp.Diff([]string{"a", "b", "c", "d"}, got); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
	})
}

// TestQuarantineWholeUnits checks the units of the outputs that see many
// records at once: the partition for ForEachPartition, the batch for
// ForEachBatch; and that a failure before the output (of a Transform) is
// not quarantined but stops Run.
func TestQuarantineWholeUnits(t *testing.T) {
	failOn := func(recs []string) error {
		for _, v := range recs {
			if v == "bad" {
				return errors.New("boom")
			}
		}
		return nil
	}
	tests := []struct {
		name    string
		build   func(s *Stream[string], box *letterBox)
		letters []string
		stops   bool
	}{
		{"ForEachPartition", func(s *Stream[string], box *letterBox) {
			ForEachPartition(s, func(_ context.Context, p Partition[string]) error { return failOn(p.Records()) }, Quarantine(box), Retry(1))
		}, []string{"x", "bad", "y"}, false},
		{"Map before ForEachPartition", func(s *Stream[string], box *letterBox) {
			m := Map(s, func(v string) string {
				if v == "bad" {
					panic("kaboom")
				}
				return v
			})
			ForEachPartition(m, func(_ context.Context, p Partition[string]) error { return failOn(p.Records()) }, Quarantine(box), Retry(1))
		}, []string{"bad"}, false},
		{"ForEachBatch", func(s *Stream[string], box *letterBox) {
			ForEachBatch(s, func(_ context.Context, b *batch.Batch[string]) error { return failOn(b.Records()) }, Quarantine(box), Retry(1))
		}, []string{"x", "bad", "y"}, false},
		{"Transform", func(s *Stream[string], box *letterBox) {
			tr := Transform(s, func(_ context.Context, b *batch.Batch[string]) (*batch.Batch[string], error) {
				return b, failOn(b.Records())
			})
			ForEach(tr, func(context.Context, string) error { return nil }, Quarantine(box), Retry(1))
		}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				p, r, s := newTest[string](t, Config{})
				box := &letterBox{}
				tt.build(s, box)
				err := feed(t, p, r, [][]string{{"ok"}, {"x", "bad", "y"}, {"later"}})
				if _, ok := errors.AsType[*BatchError](err); ok != tt.stops {
					t.Fatalf("Run = %v, want a *BatchError: %v", err, tt.stops)
				}
				var got []string
				for _, l := range box.all() {
					got = append(got, string(l.Record))
				}
				if diff := cmp.Diff(tt.letters, got); diff != "" {
					t.Errorf("letters (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestQuarantineOptionErrors checks that Run refuses a bad policy.
func TestQuarantineOptionErrors(t *testing.T) {
	p, _, s := newTest[string](t, Config{})
	ForEach(s, func(context.Context, string) error { return nil }, Retry(-1), Quarantine(nil))
	err := p.Validate()
	for _, want := range []string{"Retry(-1): must be >= 0", "Quarantine(nil)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %q", err, want)
		}
	}
}

// TestMarkedErrorStopsAtOnce checks that an output's error marked as one
// no retry fixes (internal/noretry: a configuration refused at run time,
// as repartition's) stops Run at the first try, with the error as it is,
// even with Quarantine: its records are not set aside for a configuration.
func TestMarkedErrorStopsAtOnce(t *testing.T) {
	for _, tt := range []struct {
		name      string
		opts      []Option
		forEachOp bool
	}{
		{"ForEach", nil, true},
		{"ForEachBatch", nil, false},
		{"ForEach with Quarantine", []Option{Quarantine(&letterBox{})}, true},
		{"ForEachBatch with Quarantine", []Option{Quarantine(&letterBox{})}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				p, r, s := newTest[string](t, Config{})
				refused := errors.New("refused")
				tries := 0
				fail := func(v string) error {
					if v != "bad" {
						return nil
					}
					tries++
					return noretry.Mark(refused)
				}
				addFailing(s, tt.forEachOp, fail, tt.opts...)
				err := feed(t, p, r, [][]string{{"ok"}, {"bad"}})
				if _, ok := errors.AsType[*BatchError](err); !ok || !errors.Is(err, refused) || strings.Contains(err.Error(), "Quarantine") {
					t.Fatalf("Run = %v, want a *BatchError wrapping the refusal, without advice on Quarantine", err)
				}
				if tries != 1 {
					t.Errorf("tried %d times, want 1", tries)
				}
			})
		})
	}
}

// addFailing adds an output of s that calls fail with each record: a
// ForEach if forEachOp, else a ForEachBatch that stops at the first error.
func addFailing(s *Stream[string], forEachOp bool, fail func(string) error, opts ...Option) {
	if forEachOp {
		ForEach(s, func(_ context.Context, v string) error { return fail(v) }, opts...)
		return
	}
	ForEachBatch(s, func(_ context.Context, b *batch.Batch[string]) error {
		for v := range b.All() {
			if err := fail(v); err != nil {
				return err
			}
		}
		return nil
	}, opts...)
}
