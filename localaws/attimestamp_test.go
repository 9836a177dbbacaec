package localaws

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// TestKinesaliteAtTimestampOnQuietShard checks that kinesalite, as the
// launcher starts it, answers GetShardIterator AT_TIMESTAMP on a shard
// with no record at or after the time, as Kinesis does, with an iterator
// that reads the records put after the call and none before the time;
// that a time with later records still starts at the first of them; and
// that a time in the future is still refused. kinesalite alone never
// answers the first request: the call gets no answer within its bound.
func TestKinesaliteAtTimestampOnQuietShard(t *testing.T) {
	t.Parallel()
	env := ForTest(t, Options{Kinesis: true})
	c := env.Kinesis()
	ctx := t.Context()
	const name = "quiet" // each test has servers of its own: a fixed name is free
	if err := CreateStreamOn(ctx, c, name, 1); err != nil {
		t.Fatal(err)
	}
	shard := aws.String("shardId-000000000000")
	put := func(data ...string) {
		t.Helper()
		recs := make([][]byte, len(data))
		for i, d := range data {
			recs[i] = []byte(d)
		}
		if err := PutRecordsOn(ctx, c, name, recs, func(int) string { return "k" }); err != nil {
			t.Fatal(err)
		}
	}
	at := func(ts time.Time) (*string, error) {
		t.Helper()
		// Kinesis answers at once; the bound only turns kinesalite's
		// silence into a failure instead of a hung test.
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, err := c.GetShardIterator(cctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(name), ShardId: shard,
			ShardIteratorType: ktypes.ShardIteratorTypeAtTimestamp, Timestamp: &ts})
		if err != nil {
			return nil, err
		}
		return out.ShardIterator, nil
	}
	read := func(it *string) []string {
		t.Helper()
		out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out.Records {
			got = append(got, string(r.Data))
		}
		return got
	}

	put("before")
	time.Sleep(10 * time.Millisecond) // arrival times are in milliseconds
	since := time.Now()
	it, err := at(since)
	if err != nil {
		t.Fatalf("AT_TIMESTAMP after the shard's last record: %v", err)
	}
	put("after-1", "after-2")
	if got := read(it); len(got) != 2 || got[0] != "after-1" || got[1] != "after-2" {
		t.Errorf("read from AT_TIMESTAMP on a quiet shard: %q, want [after-1 after-2]", got)
	}
	it, err = at(since)
	if err != nil {
		t.Fatalf("AT_TIMESTAMP before records: %v", err)
	}
	if got := read(it); len(got) != 2 || got[0] != "after-1" {
		t.Errorf("read from AT_TIMESTAMP before two records: %q, want [after-1 after-2]", got)
	}
	var invalid *ktypes.InvalidArgumentException
	if _, err := at(time.Now().Add(time.Hour)); !errors.As(err, &invalid) {
		t.Errorf("AT_TIMESTAMP an hour ahead: %v, want InvalidArgumentException", err)
	}
}
