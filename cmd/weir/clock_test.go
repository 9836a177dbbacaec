package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws/faults"
)

// aheadClock is the machine's clock, ahead by d.
type aheadClock struct {
	clock.Real
	d time.Duration
}

func (c aheadClock) Now() time.Time { return time.Now().Add(c.d) }

// TestReplayClockAhead replays, on a machine whose clock runs more than
// five minutes ahead of Kinesis's, a letter whose put reached the stream
// but got no answer: the next replay finds the record and does not put it
// again, for a directory and a table. Looked for from the journal's time
// (the machine's) less five minutes, it was read past and put twice.
func TestReplayClockAhead(t *testing.T) {
	for _, store := range []string{"dir", "table"} {
		t.Run(store, func(t *testing.T) {
			ctx := t.Context()
			env := servers.Env(t)
			f := newFixture(t)
			var s tableStore
			if store == "table" {
				f, s = newTableFixture(t)
			}
			clk := aheadClock{d: findMargin + time.Millisecond}
			replayWith := func(c *kinesis.Client) (string, error) {
				var out bytes.Buffer
				kc := func() (*kinesis.Client, error) { return c, nil }
				var err error
				if store == "table" {
					err = replayTable(ctx, kc, clk, s, f.stream, []string{f.ids[1]}, &out)
				} else {
					err = replay(ctx, kc, clk, f.dir, f.stream, []string{f.ids[1]}, &out)
				}
				return out.String(), err
			}
			// The letter's record reaches the stream, and the replay's put
			// gets no answer. The test puts the record itself, before the
			// replay, so that it lies before the replay's time on the
			// machine's clock less the clock's lead, as a put that an
			// instant later lost its answer would (the replay's own put is
			// lost before it reaches Kinesis).
			if _, err := f.c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("b"), PartitionKey: aws.String("k2")}); err != nil {
				t.Fatal(err)
			}
			tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "PutRecord", Kind: faults.DropRequest}}})
			if err != nil {
				t.Fatal(err)
			}
			if out, err := replayWith(env.Kinesis(func(o *kinesis.Options) { o.HTTPClient = tr })); err == nil {
				t.Fatalf("a replay whose put got no answer succeeded:\n%s", out)
			}
			var e journalEntry
			if store == "table" {
				_, state, err := s.read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				e = state[f.ids[1]]
			} else {
				state, err := readJournal(f.dir)
				if err != nil {
					t.Fatal(err)
				}
				e = state[f.ids[1]]
			}
			if e.State != statePutting || e.Kinesis.IsZero() || e.Kinesis.After(time.Now()) {
				t.Fatalf("the letter's replay state %+v, want putting, with Kinesis's time (the Date of its answer)", e)
			}
			at := e.At
			// Records put since by others, in each shard, once Kinesis's
			// clock has passed the journal's time less five minutes
			// (kinesalite never answers an AT_TIMESTAMP GetShardIterator
			// with no record after its time, mhart/kinesalite issue 84).
			for _, hashKey := range []string{"0", "340282366920938463463374607431768211455"} {
				putAfter(t, f, hashKey, at.Add(-findMargin))
			}

			out, err := replayWith(f.c)
			if err != nil {
				t.Fatalf("the replay after the lost answer: %v\n%s", err, out)
			}
			if !strings.Contains(out, f.ids[1]+": found in "+f.stream) {
				t.Errorf("the replay after the lost answer says:\n%s\nwant the letter found in the stream", out)
			}
			var got []string
			for _, r := range f.records(t) {
				if !strings.HasPrefix(r, "filler=") {
					got = append(got, r)
				}
			}
			if diff := cmp.Diff([]string{"k2=b"}, got); diff != "" {
				t.Errorf("the letter's record in the stream (-want +got):\n%s", diff)
			}
		})
	}
}

// putAfter puts filler records into the shard of hashKey until one
// arrives at since or later, on Kinesis's clock.
func putAfter(t *testing.T, f *fixture, hashKey string, since time.Time) {
	t.Helper()
	ctx := t.Context()
	for {
		res, err := f.c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: &f.stream, Data: []byte("x"),
			PartitionKey: aws.String("filler"), ExplicitHashKey: aws.String(hashKey)})
		if err != nil {
			t.Fatal(err)
		}
		it, err := f.c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: &f.stream, ShardId: res.ShardId,
			ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, StartingSequenceNumber: res.SequenceNumber})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Records) == 1 && !aws.ToTime(got.Records[0].ApproximateArrivalTimestamp).Before(since) {
			return
		}
	}
}
