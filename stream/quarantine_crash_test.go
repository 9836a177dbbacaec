package stream_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/sink/deadletter"
	"github.com/weirstream/weir/stream"
)

// crashAfterLetters is a DeadLetters that makes the letters durable in its
// directory, then fails, as a crash between the quarantine and the batch's
// completion would leave them.
type crashAfterLetters struct{ *deadletter.Dir }

func (c crashAfterLetters) Quarantine(ctx context.Context, letters []stream.DeadLetter) error {
	if err := c.Dir.Quarantine(ctx, letters); err != nil {
		return err
	}
	return errCrash
}

// TestQuarantineCrashBeforeCompletion checks that a batch that quarantined
// records and did not complete (a crash after the letters were durable)
// writes the same letters again when a restart recomputes it: nothing is
// added, nothing lost. The same for the letters of a keyed operator with
// Quarantine (CountByValue), numbered as an output after the pipeline's.
func TestQuarantineCrashBeforeCompletion(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		name := "ForEach"
		if keyed {
			name = "CountByValue"
		}
		t.Run(name, func(t *testing.T) { testQuarantineCrashBeforeCompletion(t, keyed) })
	}
}

func testQuarantineCrashBeforeCompletion(t *testing.T, keyed bool) {
	synctest.Test(t, func(t *testing.T) {
		d := &durable{log: recoverylog.NewMemory()}
		dir := t.TempDir()
		build := func(dead stream.DeadLetters) (*stream.Pipeline, *replay, *[]string) {
			p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: d.log})
			if err != nil {
				t.Fatal(err)
			}
			src := newReplay(t, d)
			var out []string
			m := stream.Map(stream.From(p, src), func(v string) string {
				if v == "r5" {
					panic("kaboom")
				}
				return v
			})
			if keyed {
				stream.ForEachBatch(stream.CountByValue(m, stream.Quarantine(dead)), func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
					for kv := range b.All() {
						out = append(out, kv.Key)
					}
					slices.Sort(out)
					return nil
				})
			} else {
				stream.ForEach(m, func(_ context.Context, v string) error { out = append(out, v); return nil },
					stream.Quarantine(dead), stream.Retry(0))
			}
			return p, src, &out
		}

		// Run 1: the batch quarantines r5, then "crashes".
		dead1, err := deadletter.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		p1, src1, _ := build(crashAfterLetters{dead1})
		errc := make(chan error, 1)
		go func() { errc <- p1.Run(t.Context()) }()
		time.Sleep(300 * time.Millisecond)
		src1.produce("r1", "r2", "r3")
		src1.produce("r4", "r5", "r6")
		if err := <-errc; !errors.Is(err, errCrash) {
			t.Fatalf("first Run = %v, want the crash", err)
		}
		first, err := dead1.Letters()
		if err != nil {
			t.Fatal(err)
		}
		dead1.Close()
		if len(first) != 1 || string(first[0].Record) != "r5" || first[0].Output != 0 && !keyed || first[0].Output != 1 && keyed {
			t.Fatalf("letters after the crash: %+v, want r5's, of output 0 (ForEach) or 1 (CountByValue, after the one output)", first)
		}

		// Run 2: the batch is recomputed from the log and completes.
		dead2, err := deadletter.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer dead2.Close()
		p2, _, out := build(dead2)
		errc = make(chan error, 1)
		go func() { errc <- p2.Run(t.Context()) }()
		time.Sleep(2 * time.Second)
		p2.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatalf("second Run: %v", err)
		}
		second, err := dead2.Letters()
		if err != nil {
			t.Fatal(err)
		}
		// The same letters: only the stack's addresses differ.
		if len(second) != 1 || second[0].Stack == "" {
			t.Fatalf("letters after the restart: %+v, want r5's, with a stack", second)
		}
		if diff := cmp.Diff(first, second, cmpopts.IgnoreFields(stream.DeadLetter{}, "Stack")); diff != "" {
			t.Errorf("letters after the restart (-first +second):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"r1", "r2", "r3", "r4", "r6"}, *out); diff != "" {
			t.Errorf("second run's output (-want +got):\n%s", diff)
		}
	})
}
