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
// write with one Sink: the records, then what second makes of them. It
// returns the Sink, the driver's logs and Run's error.
func runSharedSink(t *testing.T, second func(event) event) (*dynamodb.Sink[event], string, error) {
	t.Helper()
	c, table, _ := setup(t)
	s := newSink(t, t.Context(), dynamodb.Config{Client: c, Table: table})
	var logs logBuffer
	err := runOutputs(t, &logs, false, events(12, 4, true), func(in *stream.Stream[event]) {
		stream.ForEachBatch(in, s.Write)
		stream.ForEachBatch(stream.Map(in, second), s.Write)
	})
	return s, logs.String(), err
}

// TestSinkSharedByTwoOutputs runs a pipeline whose two outputs write the
// same items with one Sink: the second output's writes had the versions
// of the first's (the batch time and ordinal, or the same origin) and
// were skipped as already applied, lost with no error. The second
// output's first Write now fails Run at once, naming an item both write
// and saying to let one output write each item, and none of its writes
// is skipped.
func TestSinkSharedByTwoOutputs(t *testing.T) {
	t.Parallel()
	s, logs, err := runSharedSink(t, func(e event) event { e.N += 1000; return e })
	if err == nil || !strings.Contains(err.Error(), "let one output write each item") || !strings.Contains(err.Error(), "output 1, ") ||
		!strings.Contains(err.Error(), `{id: "item-0"}`) {
		t.Errorf("Run = %v, want output 1's error naming item-0 and saying to let one output write each item (Stats %+v)", err, s.Stats())
	}
	if strings.Contains(logs, "trying again") {
		t.Errorf("the refusal was tried again before Run failed:\n%s", logs)
	}
}

// TestSinkSharedByOutputsWritingOtherItems runs a pipeline whose two
// outputs write with one Sink items of their own (no item written by
// both): no write can take another output's version, and Run failed at the
// second output's first Write all the same, a pipeline that lost nothing
// refused. It now runs to its end with every write applied.
func TestSinkSharedByOutputsWritingOtherItems(t *testing.T) {
	t.Parallel()
	s, _, err := runSharedSink(t, func(e event) event { e.ID = "other-" + e.ID; return e })
	if err != nil {
		t.Errorf("Run = %v, want nil: no item is written by both outputs", err)
	}
	if st := s.Stats(); st.Written != 24 || st.Skipped != 0 {
		t.Errorf("Stats = %+v, want 24 written, 0 skipped", st)
	}
}
