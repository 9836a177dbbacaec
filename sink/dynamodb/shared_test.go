package dynamodb_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// logBuffer is a bytes.Buffer safe for a logger's concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runOutputs runs, to its drained end, a pipeline with the driver's logs
// in logs, whose source (sharing its shards if shares) holds recs, its
// outputs those outputs adds with the default options; it returns Run's
// error.
func runOutputs(t *testing.T, logs *logBuffer, shares bool, recs []event, outputs func(in *stream.Stream[event])) error {
	t.Helper()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	src, err := memory.New[event](memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Push(recs...); err != nil {
		t.Fatal(err)
	}
	outputs(stream.From(p, sharingSource{Source: src, shares: shares}))
	if err := p.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	return p.Run(ctx)
}

// TestFleetRefusalNotRetried: a batch without origins on a pipeline whose
// source shares its shards is refused alike at every try. Run went
// through the output's retries first ("trying again" warnings, or the
// batch quarantined with stream.Quarantine); it now fails at once.
func TestFleetRefusalNotRetried(t *testing.T) {
	t.Parallel()
	c, table, _ := setup(t)
	s := newSink(t, t.Context(), dynamodb.Config{Client: c, Table: table})
	var logs logBuffer
	err := runOutputs(t, &logs, true, events(12, 4, true), func(in *stream.Stream[event]) {
		stream.ForEachBatch(in, s.Write)
	})
	if !errors.Is(err, dynamodb.ErrInvalidConfig) {
		t.Errorf("Run = %v, want ErrInvalidConfig", err)
	}
	if got := logs.String(); strings.Contains(got, "trying again") {
		t.Errorf("the refusal was tried again before Run failed:\n%s", got)
	}
}

// runSharedSink runs, as runOutputs does, a pipeline whose two outputs
// write to one table: the records, then what second makes of them, with
// one Sink, or with two of the same table and version attribute if two.
// It returns the Sinks, the driver's logs and Run's error.
func runSharedSink(t *testing.T, two bool, second func(event) event) ([]*dynamodb.Sink[event], string, error) {
	t.Helper()
	c, table, _ := setup(t)
	sinks := []*dynamodb.Sink[event]{newSink(t, t.Context(), dynamodb.Config{Client: c, Table: table})}
	if two {
		sinks = append(sinks, newSink(t, t.Context(), dynamodb.Config{Client: c, Table: table}))
	}
	var logs logBuffer
	err := runOutputs(t, &logs, false, events(12, 4, true), func(in *stream.Stream[event]) {
		stream.ForEachBatch(in, sinks[0].Write)
		stream.ForEachBatch(stream.Map(in, second), sinks[len(sinks)-1].Write)
	})
	return sinks, logs.String(), err
}

// sharing names the cases of the tests of outputs sharing a table.
func sharing(two bool) string {
	if two {
		return "two Sinks of one table and version attribute"
	}
	return "one Sink"
}

// TestSinkSharedByTwoOutputs runs a pipeline whose two outputs write the
// same items with one Sink, or with two Sinks of the same table and
// version attribute: the second output's writes had the versions of the
// first's (the batch time and ordinal, or the same origin) and were
// skipped as already applied, lost with no error. The second output's
// first Write now fails Run at once, naming an item both write and saying
// to let one output write each item, and none of its writes is skipped.
// Two Sinks wrote in silence until the record of the items written was
// shared by the Sinks of a table and version attribute.
func TestSinkSharedByTwoOutputs(t *testing.T) {
	t.Parallel()
	for _, two := range []bool{false, true} {
		t.Run(sharing(two), func(t *testing.T) {
			t.Parallel()
			sinks, logs, err := runSharedSink(t, two, func(e event) event { e.N += 1000; return e })
			if err == nil || !strings.Contains(err.Error(), "let one output write each item") || !strings.Contains(err.Error(), "output 1, ") ||
				!strings.Contains(err.Error(), `{id: "item-0"}`) {
				t.Errorf("Run = %v, want output 1's error naming item-0 and saying to let one output write each item (Stats %+v)", err, sinks[0].Stats())
			}
			for i, s := range sinks {
				if st := s.Stats(); st.Skipped != 0 {
					t.Errorf("Sink %d: Stats = %+v, want no write skipped", i, st)
				}
			}
			if strings.Contains(logs, "trying again") {
				t.Errorf("the refusal was tried again before Run failed:\n%s", logs)
			}
		})
	}
}

// TestSinkSharedByOutputsWritingOtherItems runs a pipeline whose two
// outputs write items of their own (no item written by both) with one
// Sink, or with two of the same table and version attribute: no write can
// take another output's version, and Run failed at the second output's
// first Write all the same, a pipeline that lost nothing refused. It now
// runs to its end with every write applied.
func TestSinkSharedByOutputsWritingOtherItems(t *testing.T) {
	t.Parallel()
	for _, two := range []bool{false, true} {
		t.Run(sharing(two), func(t *testing.T) {
			t.Parallel()
			sinks, _, err := runSharedSink(t, two, func(e event) event { e.ID = "other-" + e.ID; return e })
			if err != nil {
				t.Errorf("Run = %v, want nil: no item is written by both outputs", err)
			}
			var written, skipped int64
			for _, s := range sinks {
				written, skipped = written+s.Stats().Written, skipped+s.Stats().Skipped
			}
			if written != 24 || skipped != 0 {
				t.Errorf("the Sinks wrote %d and skipped %d, want 24 written, 0 skipped", written, skipped)
			}
		})
	}
}
