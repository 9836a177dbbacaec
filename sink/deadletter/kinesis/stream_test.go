package kinesis_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/deadletter/kinesis"
	sinkkinesis "github.com/weirstream/weir/sink/kinesis"
	"github.com/weirstream/weir/stream"
)

var servers = localaws.NewShared(localaws.Options{Kinesis: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// newStream creates a one-shard stream and returns a Stream writing to it
// as origin "app", and the client.
func newStream(t *testing.T) (*kinesis.Stream, *awskinesis.Client, string) {
	t.Helper()
	env := servers.Env(t)
	name := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), name, 1); err != nil {
		t.Fatal(err)
	}
	c := env.Kinesis()
	return streamTo(t, c, name), c, name
}

// read returns the letters in the one-shard stream name, in order, the
// copies an origin filter drops included if all is set, and the number
// of records.
func read(t *testing.T, c *awskinesis.Client, name string, all bool) ([]stream.DeadLetter, int) {
	t.Helper()
	ctx := t.Context()
	it, err := c.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String(name),
		ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	f := origin.NewFilter(0)
	var ls []stream.DeadLetter
	n := 0
	for iter := it.ShardIterator; iter != nil; {
		page, err := c.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) == 0 {
			break
		}
		for _, r := range page.Records {
			n++
			tag, data, ok, err := origin.Decode(r.Data)
			if !ok || err != nil {
				t.Fatalf("record %s not tagged: %v", aws.ToString(r.SequenceNumber), err)
			}
			if !f.Keep(tag) && !all {
				continue
			}
			var l stream.DeadLetter
			if err := json.Unmarshal(data, &l); err != nil {
				t.Fatalf("record %s: %v", aws.ToString(r.SequenceNumber), err)
			}
			ls = append(ls, l)
		}
		iter = page.NextShardIterator
	}
	return ls, n
}

// TestPipelineOneInN quarantines the records a Map panics on, one in 1000
// of 10,000, into a stream: each is a record, with its panic, stack and
// source range, and the pipeline goes on.
func TestPipelineOneInN(t *testing.T) {
	s, c, name := newStream(t)
	bad := letterstest.RunOneInN(t, s, 10000, 1000)
	ls, _ := read(t, c, name, false)
	letterstest.Check(t, ls, bad)
}

// letter returns a letter of batch 1700000000000 and output o.
func letter(o, i int, rec string) stream.DeadLetter {
	return stream.DeadLetter{
		Time: 1700000000000, Output: o, OutputName: "out", Index: i,
		Range:  batch.SeqRange{Stream: "in", Shard: "shardId-000000000001", First: "100", Last: "200", Count: 5},
		Offset: i, Record: []byte(rec), Encoding: "raw", Err: "panic: no", Panic: "no", Stack: "goroutine 7 [running]:",
	}
}

// TestRecomputedBatchFiltered quarantines a batch's letters of two
// outputs (same batch time, same indexes), then output 0's again as a
// recomputed batch does: the stream holds a copy per call, and the origin
// filter leaves each letter once, the letters of both outputs kept.
func TestRecomputedBatchFiltered(t *testing.T) {
	s, c, name := newStream(t)
	out0 := []stream.DeadLetter{letter(0, 0, "a"), letter(0, 1, "b")}
	out1 := []stream.DeadLetter{letter(1, 0, "c")}
	for _, ls := range [][]stream.DeadLetter{out0, out1, out0} {
		if err := s.Quarantine(t.Context(), ls); err != nil {
			t.Fatal(err)
		}
	}
	checkFiltered(t, c, name, 5, append(append([]stream.DeadLetter{}, out0...), out1...), "letters after the filter")
}

// TestOversizedLetter quarantines a letter with a 2 MiB record and a 1 MiB
// stack: it is written cut to fit a record, its stack and record ending
// with markers and its encoding "truncated:raw".
func TestOversizedLetter(t *testing.T) {
	s, c, name := newStream(t)
	big := letter(0, 0, strings.Repeat("r", 2<<20))
	big.Stack = strings.Repeat("s", 1<<20)
	if err := s.Quarantine(t.Context(), []stream.DeadLetter{big, letter(0, 1, "small")}); err != nil {
		t.Fatalf("Quarantine of an oversized letter: %v", err)
	}
	got, _ := read(t, c, name, false)
	if len(got) != 2 {
		t.Fatalf("%d letters, want 2", len(got))
	}
	l := got[0]
	if l.Encoding != "truncated:raw" || !bytes.HasSuffix(l.Record, []byte(" bytes kept]")) || len(l.Record) < 700<<10 {
		t.Errorf("big letter: encoding %q, record of %d bytes: want it cut with a marker", l.Encoding, len(l.Record))
	}
	if !strings.HasSuffix(l.Stack, " bytes kept]") || len(l.Stack) > 100 {
		t.Errorf("big letter: stack of %d bytes: want it cut first", len(l.Stack))
	}
	if string(got[1].Record) != "small" {
		t.Errorf("second letter's record %q, want small", got[1].Record)
	}
}

// TestNewRefuses checks that New names what is missing or wrong.
func TestNewRefuses(t *testing.T) {
	_, err := kinesis.New(sinkkinesis.Config[stream.DeadLetter]{Stream: "s",
		Record: func(stream.DeadLetter) (string, []byte) { return "", nil }})
	if !errors.Is(err, sinkkinesis.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"Record set", "Origin empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want it to name %q", err, want)
		}
	}
	_, err = kinesis.New(sinkkinesis.Config[stream.DeadLetter]{Stream: "s", Origin: "app"})
	if !errors.Is(err, sinkkinesis.ErrInvalidConfig) || !strings.Contains(err.Error(), "Client nil") {
		t.Errorf("New without Client = %v, want ErrInvalidConfig naming Client", err)
	}
	// The longest writer (an output of 3 digits, the fingerprint, a
	// random name of the worker or the Run) must fit a tag's 128 bytes.
	for _, n := range []int{90, 91} {
		_, err = kinesis.New(sinkkinesis.Config[stream.DeadLetter]{Client: servers.Env(t).Kinesis(), Stream: "s", Origin: strings.Repeat("o", n)})
		if n == 90 && err != nil {
			t.Errorf("New with an Origin of 90 bytes = %v, want nil", err)
		}
		if n == 91 && (!errors.Is(err, sinkkinesis.ErrInvalidConfig) || !strings.Contains(err.Error(), "Origin of 91 bytes")) {
			t.Errorf("New with an Origin of 91 bytes = %v, want ErrInvalidConfig naming Origin", err)
		}
	}
	// A limit that leaves no room for a letter once the tag's room is
	// taken would fail every Quarantine, and so every batch quarantining.
	_, err = kinesis.New(sinkkinesis.Config[stream.DeadLetter]{Client: servers.Env(t).Kinesis(), Stream: "s", Origin: "app", MaxRecordBytes: 1000})
	if !errors.Is(err, sinkkinesis.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxRecordBytes 1000") {
		t.Errorf("New with MaxRecordBytes 1000 = %v, want ErrInvalidConfig naming MaxRecordBytes", err)
	}
}

// TestLongOriginLargeOutput quarantines letters of output 1000 through
// Streams of an Origin of 90 bytes, the most New takes, whose writer is 1
// byte longer than New's limit counted on: on a fleet, without a recovery
// log, and with a Worker of 16 bytes, Quarantine fails, and its error
// names the Origin as the user gave it, its length and the fix, not the
// Origin lengthened by the output and the fingerprint. On one worker with
// a recovery log, the writer fits and the letters are written.
func TestLongOriginLargeOutput(t *testing.T) {
	env := servers.Env(t)
	name := localaws.UniqueName(t)
	if err := env.CreateStream(t.Context(), name, 1); err != nil {
		t.Fatal(err)
	}
	c := env.Kinesis()
	long := strings.Repeat("o", 90)
	ls := []stream.DeadLetter{letter(1000, 0, "a")}
	newStream := func(worker string) *kinesis.Stream {
		s, err := kinesis.New(sinkkinesis.Config[stream.DeadLetter]{Client: c, Stream: name, Origin: long, Worker: worker})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		what   string
		worker string
		on     func(f func(ctx context.Context) error)
	}{
		{"on a fleet", "", func(f func(context.Context) error) { letterstest.OnFleet(t, f) }},
		{"without a recovery log", "", func(f func(context.Context) error) { letterstest.OnPipeline(t, nil, f) }},
		{"with Worker", strings.Repeat("w", 16), func(f func(context.Context) error) { letterstest.OnPipeline(t, recovery.Dir(t.TempDir()), f) }},
	} {
		s := newStream(tc.worker)
		var err error
		tc.on(func(ctx context.Context) error {
			err = s.Quarantine(ctx, ls)
			return nil
		})
		if !errors.Is(err, sinkkinesis.ErrInvalidConfig) {
			t.Errorf("%s: Quarantine = %v, want ErrInvalidConfig", tc.what, err)
			continue
		}
		for _, want := range []string{"Origin of 90 bytes", "output 1000", "shorten Origin to at most 89 bytes"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: Quarantine = %v, want it to name %q", tc.what, err, want)
			}
		}
	}
	s := newStream("")
	letterstest.OnPipeline(t, recovery.Dir(t.TempDir()), func(ctx context.Context) error { return s.Quarantine(ctx, ls) })
	checkFiltered(t, c, name, 1, ls, "letters of output 1000 on one worker")
}

// checkFiltered checks that stream name holds records records (a copy per
// Quarantine call), and, after the origin filter, the letters want.
func checkFiltered(t *testing.T, c *awskinesis.Client, name string, records int, want []stream.DeadLetter, what string) {
	t.Helper()
	got, n := read(t, c, name, false)
	if n != records {
		t.Errorf("%d records, want %d: a copy per call", n, records)
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(bytes.Equal)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// streamTo returns a Stream to stream name of c, of Origin "app": each
// call's is another worker's, or the same worker's restarted.
func streamTo(t *testing.T, c *awskinesis.Client, name string) *kinesis.Stream {
	t.Helper()
	s, err := kinesis.New(sinkkinesis.Config[stream.DeadLetter]{Client: c, Stream: name, Origin: "app"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFleetWorkersKept quarantines, from the output of a pipeline sharing
// its shards with other workers, letters of the same batch time, output
// and indexes through two Streams of the same Origin, two workers, each
// twice (a recomputed batch): the origin filter keeps each worker's
// letters once, as their tags name the worker.
func TestFleetWorkersKept(t *testing.T) {
	s, c, name := newStream(t)
	other := streamTo(t, c, name)
	a := []stream.DeadLetter{letter(0, 0, "a0"), letter(0, 1, "a1")}
	b := []stream.DeadLetter{letter(0, 0, "b0")}
	letterstest.OnFleet(t, func(ctx context.Context) error {
		for _, w := range []struct {
			s  *kinesis.Stream
			ls []stream.DeadLetter
		}{{s, a}, {other, b}, {s, a}, {other, b}} {
			if err := w.s.Quarantine(ctx, w.ls); err != nil {
				return err
			}
		}
		return nil
	})
	checkFiltered(t, c, name, 6, []stream.DeadLetter{a[0], a[1], b[0]}, "letters of two workers after the filter")
}

// TestTimeReusedWithoutLog quarantines, from the outputs of two Runs of a
// pipeline on one worker without a recovery log (two Streams: the process
// restarted, its wall clock behind the first Run's batches), letters of
// the same batch time, output and indexes, each Run's twice (an output
// retried): the origin filter keeps each Run's letters once. Tagged by
// Origin, batch time and index alone, the second Run's letters had the
// first's tags and were dropped as copies of them, and lost.
func TestTimeReusedWithoutLog(t *testing.T) {
	s, c, name := newStream(t)
	restarted := streamTo(t, c, name)
	a := []stream.DeadLetter{letter(0, 0, "a0"), letter(0, 1, "a1")}
	b := []stream.DeadLetter{letter(0, 0, "b0")}
	for _, run := range []struct {
		s  *kinesis.Stream
		ls []stream.DeadLetter
	}{{s, a}, {restarted, b}} {
		letterstest.OnPipeline(t, nil, func(ctx context.Context) error {
			for range 2 {
				if err := run.s.Quarantine(ctx, run.ls); err != nil {
					return err
				}
			}
			return nil
		})
	}
	checkFiltered(t, c, name, 6, []stream.DeadLetter{a[0], a[1], b[0]}, "letters of two Runs after the filter")
}

// TestRecomputedOtherLetters quarantines, from the output of a pipeline
// with a recovery log, a batch's letters, then, through another Stream
// (the process restarted), the letters of the batch recomputed, which
// failed another record than the first time (a flaky downstream), twice:
// the origin filter keeps both letters, each once. Tagged by batch time
// and index alone, the second letter had the first's tag and was dropped
// as a copy of it, and lost.
func TestRecomputedOtherLetters(t *testing.T) {
	s, c, name := newStream(t)
	restarted := streamTo(t, c, name)
	first := letter(0, 0, "a")
	other := letter(0, 0, "b")
	other.Offset = 3
	for _, run := range []struct {
		s *kinesis.Stream
		l stream.DeadLetter
	}{{s, first}, {restarted, other}, {restarted, other}} {
		letterstest.OnPipeline(t, recovery.Dir(t.TempDir()), func(ctx context.Context) error {
			return run.s.Quarantine(ctx, []stream.DeadLetter{run.l})
		})
	}
	checkFiltered(t, c, name, 3, []stream.DeadLetter{first, other}, "letters after the filter")
}

// TestNewNamesEveryBadField: a Config with its own fields wrong (Origin
// empty) and the sink's too (no Client, no Stream) was refused naming
// Origin alone, and once that was fixed, the sink's fields: every bad
// field is now named at once.
func TestNewNamesEveryBadField(t *testing.T) {
	_, err := kinesis.New(sinkkinesis.Config[stream.DeadLetter]{MaxRecordBytes: -1})
	if !errors.Is(err, sinkkinesis.ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"Origin empty", "Client nil", "Stream empty", "MaxRecordBytes -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New = %v, want it to name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Record nil") {
		t.Errorf("New = %v: Record is the Stream's to set, not a problem of the Config", err)
	}
}
