package kinesis_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/recovery"
	deadletter "github.com/weirstream/weir/sink/deadletter/kinesis"
	"github.com/weirstream/weir/sink/kinesis"
	weirsource "github.com/weirstream/weir/source"
	source "github.com/weirstream/weir/source/kinesis"
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

// sharedRecords is how many records runOutputs pushes.
const sharedRecords = 4

// runOutputs runs, in a synctest bubble, a pipeline over a memory source
// holding sharedRecords records ("k/1" to "k/4", their sequence numbers
// 1 to 4, so that an output with stream.Origins has their origins), its
// outputs those outputs adds, with the driver's logs in logs, and returns
// Run's error (a deadline's once 5 s of the bubble's time passed). With
// fleet set the pipeline has a recovery log and its source shares its
// shards with other workers.
func runOutputs(t *testing.T, fleet bool, logs *logBuffer, outputs func(in *stream.Stream[source.Record])) error {
	t.Helper()
	var err error
	synctest.Test(t, func(t *testing.T) {
		cfg := stream.Config{BatchInterval: time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))}
		if fleet {
			cfg.Recovery = recovery.Dir(filepath.Join(t.TempDir(), "log"))
		}
		p, perr := stream.NewPipeline(cfg)
		if perr != nil {
			t.Fatal(perr)
		}
		src, perr := memory.New[source.Record](memory.Config{})
		if perr != nil {
			t.Fatal(perr)
		}
		recs := make([]source.Record, sharedRecords)
		for i := range recs {
			n := strconv.Itoa(i + 1)
			recs[i] = source.Record{Data: []byte("k/" + n), SequenceNumber: n}
		}
		if perr := src.Push(recs...); perr != nil {
			t.Fatal(perr)
		}
		var from weirsource.Receiver[source.Record] = src
		if fleet {
			from = sharing{src}
		}
		outputs(stream.From(p, from))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		err = p.Run(ctx)
	})
	return err
}

func dataOf(r source.Record) (string, []byte) { return "k", r.Data }

// sharedSink returns a fake stream and a Sink with Origin writing to it,
// for outputs to share.
func sharedSink(t *testing.T) (*fakeStream, *kinesis.Sink[source.Record]) {
	t.Helper()
	f := newFake(t, nil)
	s, err := kinesis.New(kinesis.Config[source.Record]{Client: f, Stream: "out", Record: dataOf, Origin: "app/out"})
	if err != nil {
		t.Fatal(err)
	}
	return f, s
}

// TestSinkSharedByTwoOutputs runs a pipeline whose two outputs write with
// one Sink with Origin: both outputs' batches of a time had the same
// origin tags, so a reader's duplicate filter dropped one output's records
// as copies of the other's, with no error anywhere. The second output's
// first Write now fails Run at once (no retries), saying to give each
// output a Sink of its own; one output per Sink still runs.
func TestSinkSharedByTwoOutputs(t *testing.T) {
	_, s := sharedSink(t)
	var logs logBuffer
	err := runOutputs(t, false, &logs, func(in *stream.Stream[source.Record]) {
		stream.ForEachBatch(in, s.Write)
		stream.ForEachBatch(stream.Map(in, func(r source.Record) source.Record { return r }), s.Write)
	})
	if err == nil || !strings.Contains(err.Error(), "give each output a Sink of its own") || !strings.Contains(err.Error(), "output 1, ") {
		t.Errorf("Run = %v, want output 1's error saying to give each output a Sink of its own", err)
	}
	if got := logs.String(); strings.Contains(got, "trying again") {
		t.Errorf("the refusal was tried again before Run failed:\n%s", got)
	}
}

// TestSinkSharedByOutputsWritingOtherOrigins runs pipelines whose two
// outputs write with one Sink with Origin records whose tags cannot meet:
// records of distinct source records with their origins (version 2 tags,
// which name the origin alone), one output's as records of the even
// source records, the other's of the odd ones; and one output's records
// without origins (version 1 tags, naming the Sink's writer), the
// other's with theirs. Run failed at the second output's first Write all
// the same, a pipeline that lost nothing refused. It now runs to its end
// (its deadline), every record written with a tag of its own.
func TestSinkSharedByOutputsWritingOtherOrigins(t *testing.T) {
	odd := func(r source.Record) bool { return parse(t, r.Data).I%2 == 1 }
	even := func(r source.Record) bool { return !odd(r) }
	for _, tc := range []struct {
		name    string
		outputs func(s *kinesis.Sink[source.Record], in *stream.Stream[source.Record])
		want    int // records written
		v2      int // of them with version 2 tags
	}{
		{"origins of other records", func(s *kinesis.Sink[source.Record], in *stream.Stream[source.Record]) {
			stream.ForEachBatch(stream.Filter(in, odd), s.Write, stream.Origins())
			stream.ForEachBatch(stream.Filter(in, even), s.Write, stream.Origins())
		}, sharedRecords, sharedRecords},
		{"without origins and with", func(s *kinesis.Sink[source.Record], in *stream.Stream[source.Record]) {
			stream.ForEachBatch(in, s.Write)
			stream.ForEachBatch(in, s.Write, stream.Origins())
		}, 2 * sharedRecords, sharedRecords},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, s := sharedSink(t)
			var logs logBuffer
			err := runOutputs(t, false, &logs, func(in *stream.Stream[source.Record]) { tc.outputs(s, in) })
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Run = %v, want its deadline's error or nil: the outputs' tags cannot meet", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			tags, v2 := make(map[origin.Tag]bool), 0
			for _, tag := range f.tags {
				tags[tag] = true
				v2 += boolInt(tag.Seq != "")
			}
			if len(f.written) != tc.want || len(tags) != tc.want || v2 != tc.v2 {
				t.Errorf("%d records written, %d distinct tags, %d of version 2; want %d, %d, %d", len(f.written), len(tags), v2, tc.want, tc.want, tc.v2)
			}
		})
	}
}

// TestSinkSharedByOutputsWritingOneOrigin runs a pipeline whose two
// outputs write with one Sink with Origin, both with their origins, a
// record of the same source record (one output all of them, the other the
// odd ones, through a Map): both records have the same version 2 tag, and a
// reader drops one. The second output's Write fails Run at once, naming
// the origin and the fix.
func TestSinkSharedByOutputsWritingOneOrigin(t *testing.T) {
	f, s := sharedSink(t)
	var logs logBuffer
	err := runOutputs(t, false, &logs, func(in *stream.Stream[source.Record]) {
		stream.ForEachBatch(in, s.Write, stream.Origins())
		odd := stream.Filter(in, func(r source.Record) bool { return parse(t, r.Data).I%2 == 1 })
		stream.ForEachBatch(stream.Map(odd, func(r source.Record) source.Record {
			r.Data = append([]byte(nil), r.Data...)
			return r
		}), s.Write, stream.Origins())
	})
	for _, want := range []string{"output 0 of the pipeline", "origin memory/shardId-000000000000 sequence number 1, sub-sequence 0, index 0", "so does output 1 ",
		"let one output write the records of each source record"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want an error saying %q", err, want)
		}
	}
	if got := logs.String(); strings.Contains(got, "trying again") {
		t.Errorf("the refusal was tried again before Run failed:\n%s", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.written) != sharedRecords {
		t.Errorf("%d records written, want output 0's %d alone", len(f.written), sharedRecords)
	}
}

// TestOriginRefusalsNotRetried: an Origin too long for a tag's writer
// once the writer names the Run (no recovery log) or the worker (a source
// sharing its shards) fails Write with ErrInvalidConfig at every try.
// Run went through the output's retries first ("trying again" warnings,
// or the batch quarantined with stream.Quarantine); it now fails at once.
func TestOriginRefusalsNotRetried(t *testing.T) {
	for _, fleet := range []bool{false, true} {
		f := newFake(t, nil)
		s, err := kinesis.New(kinesis.Config[source.Record]{Client: f, Stream: "out", Record: dataOf, Origin: strings.Repeat("o", 128)})
		if err != nil {
			t.Fatal(err)
		}
		var logs logBuffer
		err = runOutputs(t, fleet, &logs, func(in *stream.Stream[source.Record]) {
			stream.ForEachBatch(in, func(ctx context.Context, b *batch.Batch[source.Record]) error { return s.Write(ctx, b) })
		})
		if !errors.Is(err, kinesis.ErrInvalidConfig) {
			t.Errorf("fleet %v: Run = %v, want ErrInvalidConfig", fleet, err)
		}
		if got := logs.String(); strings.Contains(got, "trying again") {
			t.Errorf("fleet %v: the refusal was tried again before Run failed:\n%s", fleet, got)
		}
	}
}

// TestTwoSinksOfOneStream runs pipelines whose two outputs write to one
// stream, each with a Sink of its own. Records of distinct outputs with the
// same tag (the same origin, or the same writer, batch time and index
// without origins) lost one of them to a reader's duplicate filter with no
// error, as with one Sink given to both outputs, which was refused: each
// Sink kept its own record of what the outputs wrote. The record is now
// shared by the Sinks of a stream (by writer, for records without
// origins), so the second output's Write fails Run at once; Sinks whose
// tags cannot meet (two Origins, so two writers) still run.
func TestTwoSinksOfOneStream(t *testing.T) {
	for _, tc := range []struct {
		name    string
		origin  [2]string // the Sinks' Origins
		origins bool      // the outputs write with their records' origins
		refusal string    // in Run's error; empty: Run reaches its deadline
	}{
		{"one origin written by both", [2]string{"app/out", "app/out"}, true, "let one output write the records of each source record"},
		{"one writer without origins", [2]string{"app/out", "app/out"}, false, "give each output a Sink of its own"},
		{"two writers without origins", [2]string{"app/out", "app/other"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, nil)
			var sinks []*kinesis.Sink[source.Record]
			for _, o := range tc.origin {
				s, err := kinesis.New(kinesis.Config[source.Record]{Client: f, Stream: "out", Record: dataOf, Origin: o})
				if err != nil {
					t.Fatal(err)
				}
				sinks = append(sinks, s)
			}
			var opts []stream.Option
			if tc.origins {
				opts = append(opts, stream.Origins())
			}
			var logs logBuffer
			err := runOutputs(t, false, &logs, func(in *stream.Stream[source.Record]) {
				stream.ForEachBatch(in, sinks[0].Write, opts...)
				stream.ForEachBatch(stream.Map(in, func(r source.Record) source.Record { return r }), sinks[1].Write, opts...)
			})
			f.mu.Lock()
			defer f.mu.Unlock()
			tags := make(map[origin.Tag]bool)
			for _, tag := range f.tags {
				tags[tag] = true
			}
			if tc.refusal == "" {
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Run = %v, want its deadline's error or nil: the Sinks' tags cannot meet", err)
				}
				if len(f.written) != 2*sharedRecords || len(tags) != 2*sharedRecords {
					t.Errorf("%d records written with %d distinct tags, want %d of each", len(f.written), len(tags), 2*sharedRecords)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.refusal) || !strings.Contains(err.Error(), "output 1, ") {
				t.Errorf("Run = %v, want output 1's error saying %q", err, tc.refusal)
			}
			if len(tags) != len(f.written) {
				t.Errorf("%d records written with %d distinct tags: a reader drops the copies", len(f.written), len(tags))
			}
			if got := logs.String(); strings.Contains(got, "trying again") {
				t.Errorf("the refusal was tried again before Run failed:\n%s", got)
			}
		})
	}
}

// wrappedClient is a client wrapper of a comparable type holding a value
// that cannot be hashed (a slice beside the client).
type wrappedClient struct{ kinesis.Client }

type taggedClient struct {
	kinesis.Client
	tags []string
}

// TestNewWithUnhashableClient: such a Config.Client made New panic (the
// key of what the Sinks of a stream share); it now gets a record of its
// own.
func TestNewWithUnhashableClient(t *testing.T) {
	f := newFake(t, nil)
	if _, err := kinesis.New(kinesis.Config[source.Record]{Client: wrappedClient{taggedClient{Client: f, tags: []string{"team"}}}, Stream: "out", Record: dataOf, Origin: "app/out"}); err != nil {
		t.Fatal(err)
	}
}

// TestQuarantinedBatchesLeaveNoWriters quarantines the record of each of
// 20 batches into a dead-letter stream, whose letters of each batch a Sink
// of their own writes as a writer naming their fingerprint. The record of
// the writers of batches without origins kept an entry for each of those
// writers, though the driver quarantines with a context that names no
// output (there is nothing to claim), and dropped none for the life of the
// process; it now holds none, during the Run and after it.
func TestQuarantinedBatchesLeaveNoWriters(t *testing.T) {
	const batches = 20
	name := "letters-" + t.Name()
	synctest.Test(t, func(t *testing.T) {
		dead, err := deadletter.New(kinesis.Config[stream.DeadLetter]{Client: &nopKinesis{}, Stream: name, Origin: "app"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[string](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Push("0"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// Each batch's record is refused, and quarantined; the output,
		// called first with the latest record pushed, pushes the next
		// batch's, and at the last one counts the entries the earlier
		// batches' letters left and stops the Run, which drains.
		seen, during := 1, -1
		stream.ForEach(stream.From(p, src), func(_ context.Context, r string) error {
			if r != strconv.Itoa(seen-1) {
				return fmt.Errorf("record %s refused again", r)
			}
			switch {
			case seen < batches:
				if err := src.Push(strconv.Itoa(seen)); err != nil {
					t.Error(err)
				}
				seen++
			case during < 0:
				during = kinesis.Writers(name)
				cancel()
			}
			return fmt.Errorf("record %s refused", r)
		}, stream.Retry(0), stream.Quarantine(dead))
		if err := p.Run(ctx); err != nil {
			t.Fatalf("Run = %v, want nil: every record quarantined", err)
		}
		if seen != batches || during < 0 {
			t.Fatalf("%d records seen, the last one counted: %t; want %d, true", seen, during >= 0, batches)
		}
		if during != 0 {
			t.Errorf("%d entries for the dead-letter stream after %d quarantined batches, want 0", during, batches-1)
		}
		if got := kinesis.Writers(name); got != 0 {
			t.Errorf("%d entries for the dead-letter stream after the Run, want 0", got)
		}
	})
}

// TestEndedRunsLeaveNoWriters runs, one after the other, three pipelines
// without a recovery log whose output writes batches without origins with
// a Sink with Origin, so that each Run writes as a writer of its own
// (Origin and the Run's name). The record of the writers kept each Run's
// entry once the Run had ended, when nothing can clash with it any more;
// it now drops it when the Run ends, and keeps it while the Run runs.
func TestEndedRunsLeaveNoWriters(t *testing.T) {
	name := "out-" + t.Name()
	for run := range 3 {
		s, err := kinesis.New(kinesis.Config[source.Record]{Client: newFake(t, nil), Stream: name, Record: dataOf, Origin: "app/out"})
		if err != nil {
			t.Fatal(err)
		}
		var logs logBuffer
		during := -1
		err = runOutputs(t, false, &logs, func(in *stream.Stream[source.Record]) {
			stream.ForEachBatch(in, func(ctx context.Context, b *batch.Batch[source.Record]) error {
				err := s.Write(ctx, b)
				during = kinesis.Writers(name)
				return err
			})
		})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run %d = %v, want its deadline's error or nil", run, err)
		}
		if during != 1 {
			t.Errorf("%d entries for the stream while Run %d wrote, want 1 (its writer's)", during, run)
		}
		if got := kinesis.Writers(name); got != 0 {
			t.Errorf("%d entries for the stream after Run %d ended, want 0", got, run)
		}
	}
}
