package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/sink/deadletter"
	weirkinesis "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// TestReplayDoesNotTakeTheLettersOwnRecord replays a letter into the stream
// its record was read from, the usual case: the first put gets no answer
// and never reaches Kinesis, so the next replay looks for it in the stream.
// The letter's own record is there, with the same partition key and data:
// taken for the replay's put, the letter was marked replayed and never put,
// lost. Its record (a kinesis.Record's ShardID and SequenceNumber) and its
// range are left out of the search: the letter is put.
func TestReplayDoesNotTakeTheLettersOwnRecord(t *testing.T) {
	for _, withRange := range []bool{false, true} {
		name := "record's position"
		if withRange {
			name = "letter's range"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			ctx := t.Context()
			// The original record, read by the pipeline a moment ago and quarantined.
			res, err := f.c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("orig"), PartitionKey: aws.String("ko")})
			if err != nil {
				t.Fatal(err)
			}
			r := weirkinesis.Record{Data: []byte("orig"), PartitionKey: "ko"}
			l := stream.DeadLetter{Time: 9000, Encoding: "json", Err: "boom"}
			if withRange {
				l.Range = batch.SeqRange{Stream: f.stream, Shard: *res.ShardId, First: *res.SequenceNumber, Last: *res.SequenceNumber, Count: 1}
			} else {
				r.SequenceNumber, r.ShardID = *res.SequenceNumber, *res.ShardId
			}
			if l.Record, err = json.Marshal(r); err != nil {
				t.Fatal(err)
			}
			dead, err := deadletter.Open(f.dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := dead.Quarantine(context.Background(), []stream.DeadLetter{l}); err != nil {
				t.Fatal(err)
			}
			dead.Close()
			// The replay's put gets no answer and never reached Kinesis.
			tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "PutRecord", Kind: faults.DropRequest}}})
			if err != nil {
				t.Fatal(err)
			}
			c := servers.Env(t).Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr })
			var out bytes.Buffer
			if err := replay(ctx, func() (*kinesis.Client, error) { return c, nil }, clock.Real{}, f.dir, f.stream, []string{"9000-0-0"}, &out); err == nil {
				t.Fatalf("put with no answer succeeded:\n%s", out.String())
			}
			out2 := f.replay(t, "9000-0-0")
			if strings.Contains(out2, *res.SequenceNumber) {
				t.Errorf("the replay took the original record (seq %s) for its own put:\n%s", *res.SequenceNumber, out2)
			}
			if n := strings.Count(strings.Join(f.records(t), " "), "ko=orig"); n != 2 {
				t.Errorf("stream holds ko=orig %d times, want 2 (the original and the replay)\nsecond replay said: %s", n, out2)
			}
		})
	}
}

// TestReplayedIDReusedByANewLetter: the journal was keyed by the letter's
// ID (<batch time>-<output>-<index>) alone. After the fix ErrTimeReused
// names (move the files of that time out of the directory), the pipeline
// writes a new letter with a replayed one's ID: replay -all said it was
// replayed already and never put it, and list said it went to the stream.
// Entries now record the letter's fingerprint.
func TestReplayedIDReusedByANewLetter(t *testing.T) {
	f := newFixture(t)
	f.replay(t, "1000-0-0") // k1=a, replayed
	// The operator follows ErrTimeReused's advice: move the file of time 1000 out.
	moved := filepath.Join(t.TempDir(), "letters-0000000001000-000.jsonl")
	if err := os.Rename(filepath.Join(f.dir, "letters-0000000001000-000.jsonl"), moved); err != nil {
		t.Fatal(err)
	}
	dead, err := deadletter.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(weirkinesis.Record{Data: []byte("z"), PartitionKey: "kz"})
	if err := dead.Quarantine(context.Background(), []stream.DeadLetter{{Time: 1000, Output: 0, Index: 0, Record: rec, Encoding: "json", Err: "new failure"}}); err != nil {
		t.Fatal(err)
	}
	dead.Close()
	lst, _ := f.cmd(t, "deadletters", "list", "-dir", f.dir)
	if line := lineOf(lst, "1000-0-0"); !strings.Contains(line, " no ") {
		t.Errorf("list shows the new letter 1000-0-0 as replayed: %q", line)
	}
	out := f.replay(t)
	if got := f.records(t); !strings.Contains(strings.Join(got, " "), "kz=z") {
		t.Errorf("new letter 1000-0-0 (kz=z) never put; stream %v\nreplay said:\n%s", got, out)
	}
}

// lineOf returns the line of out that starts with prefix.
func lineOf(out, prefix string) string {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
