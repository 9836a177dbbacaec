package kinesistest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/source/kinesis/kinesistest"
)

// newStream returns a fake with stream "s" of shards shards.
func newStream(t *testing.T, shards int) *kinesistest.Fake {
	t.Helper()
	f := kinesistest.New()
	if err := f.CreateStream("s", shards); err != nil {
		t.Fatal(err)
	}
	return f
}

// putN puts n records with key "k" on stream "s" and returns their
// sequence numbers.
func putN(t *testing.T, f *kinesistest.Fake, n int) []string {
	t.Helper()
	var seqs []string
	for range n {
		_, seq, err := f.Put("s", "k", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

func iterAt(t *testing.T, f *kinesistest.Fake, shard string, typ types.ShardIteratorType, seq string) *string {
	t.Helper()
	in := &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String(shard), ShardIteratorType: typ}
	if seq != "" {
		in.StartingSequenceNumber = aws.String(seq)
	}
	out, err := f.GetShardIterator(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out.ShardIterator
}

func seqsOf(out *awskinesis.GetRecordsOutput) []string {
	var s []string
	for _, r := range out.Records {
		s = append(s, aws.ToString(r.SequenceNumber))
	}
	return s
}

func TestInjectThrottling(t *testing.T) {
	tests := []struct {
		op   string
		call func(context.Context, *kinesistest.Fake) error
		want any
	}{
		{kinesistest.OpGetRecords, func(ctx context.Context, f *kinesistest.Fake) error {
			out, err := f.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				return err
			}
			_, err = f.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: out.ShardIterator})
			return err
		}, new(*types.ProvisionedThroughputExceededException)},
		{kinesistest.OpGetShardIterator, func(ctx context.Context, f *kinesistest.Fake) error {
			_, err := f.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeLatest})
			return err
		}, new(*types.ProvisionedThroughputExceededException)},
		{kinesistest.OpListShards, func(ctx context.Context, f *kinesistest.Fake) error {
			_, err := f.ListShards(ctx, &awskinesis.ListShardsInput{StreamName: aws.String("s")})
			return err
		}, new(*types.LimitExceededException)},
		{kinesistest.OpDescribeStreamSummary, func(ctx context.Context, f *kinesistest.Fake) error {
			_, err := f.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String("s")})
			return err
		}, new(*types.LimitExceededException)},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			f := newStream(t, 1)
			if err := f.InjectThrottling(tt.op, 2); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if err := tt.call(t.Context(), f); !errors.As(err, tt.want) {
					t.Errorf("call %d: %v, want %T", i, err, tt.want)
				}
			}
			if err := tt.call(t.Context(), f); err != nil {
				t.Errorf("call after the throttled ones: %v", err)
			}
			if got := f.Calls(tt.op); got != 3 {
				t.Errorf("Calls(%s) = %d, want 3", tt.op, got)
			}
		})
	}
	f := kinesistest.New()
	if err := f.InjectThrottling("PutRecords", 1); err == nil {
		t.Error("InjectThrottling of an unknown operation: no error")
	}
	if err := f.InjectThrottling(kinesistest.OpGetRecords, -1); err == nil {
		t.Error("InjectThrottling of -1 calls: no error")
	}
}

func TestExpiry(t *testing.T) {
	tests := []struct {
		name    string
		act     func(f *kinesistest.Fake)
		expired bool
	}{
		{"fresh", func(*kinesistest.Fake) {}, false},
		{"ExpireIterators", (*kinesistest.Fake).ExpireIterators, true},
		{"at the TTL", func(*kinesistest.Fake) { time.Sleep(kinesistest.IteratorTTL) }, false},
		{"past the TTL", func(*kinesistest.Fake) { time.Sleep(kinesistest.IteratorTTL + time.Millisecond) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newStream(t, 1)
				it := iterAt(t, f, "shardId-000000000000", types.ShardIteratorTypeTrimHorizon, "")
				tt.act(f)
				_, err := f.GetRecords(t.Context(), &awskinesis.GetRecordsInput{ShardIterator: it})
				var expired *types.ExpiredIteratorException
				if got := errors.As(err, &expired); got != tt.expired {
					t.Errorf("GetRecords: %v, want expired %t", err, tt.expired)
				}
				fresh := iterAt(t, f, "shardId-000000000000", types.ShardIteratorTypeTrimHorizon, "")
				if _, err := f.GetRecords(t.Context(), &awskinesis.GetRecordsInput{ShardIterator: fresh}); err != nil {
					t.Errorf("GetRecords with a new iterator: %v", err)
				}
			})
		})
	}
}

func TestNextTokenExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(t, 3)
		out, err := f.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(1)})
		if err != nil || out.NextToken == nil {
			t.Fatalf("ListShards: %v, NextToken %v", err, out)
		}
		time.Sleep(kinesistest.NextTokenTTL + time.Second)
		_, err = f.ListShards(t.Context(), &awskinesis.ListShardsInput{NextToken: out.NextToken})
		var expired *types.ExpiredNextTokenException
		if !errors.As(err, &expired) {
			t.Errorf("ListShards with an old token: %v, want ExpiredNextTokenException", err)
		}
	})
}

func TestTrim(t *testing.T) {
	f := newStream(t, 1)
	seqs := putN(t, f, 5)
	const shard = "shardId-000000000000"
	old := iterAt(t, f, shard, types.ShardIteratorTypeTrimHorizon, "")
	if err := f.Trim("s", shard, seqs[2]); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		it   *string
	}{
		{"TRIM_HORIZON", iterAt(t, f, shard, types.ShardIteratorTypeTrimHorizon, "")},
		{"AT a trimmed number", iterAt(t, f, shard, types.ShardIteratorTypeAtSequenceNumber, seqs[0])},
		{"AFTER a trimmed number", iterAt(t, f, shard, types.ShardIteratorTypeAfterSequenceNumber, seqs[0])},
		{"an iterator from before", old},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := f.GetRecords(t.Context(), &awskinesis.GetRecordsInput{ShardIterator: tt.it})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(seqs[2:], seqsOf(out)); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}
	if err := f.Trim("s", shard, "not-a-number"); err == nil {
		t.Error("Trim before a bad number: no error")
	}
}

func TestClockFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStream(t, 1)
		t0 := time.Now()
		putN(t, f, 1)
		time.Sleep(3 * time.Second)
		putN(t, f, 1)
		time.Sleep(2 * time.Second)
		it := iterAt(t, f, "shardId-000000000000", types.ShardIteratorTypeTrimHorizon, "")
		out, err := f.GetRecords(t.Context(), &awskinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(1)})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToTime(out.Records[0].ApproximateArrivalTimestamp); !got.Equal(t0) {
			t.Errorf("ApproximateArrivalTimestamp %v, want %v", got, t0)
		}
		if got := aws.ToInt64(out.MillisBehindLatest); got != 2000 {
			t.Errorf("MillisBehindLatest %d, want 2000 (the next record arrived 2s ago)", got)
		}
		at := t0.Add(time.Second)
		ts, err := f.GetShardIterator(t.Context(), &awskinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: &at})
		if err != nil {
			t.Fatal(err)
		}
		out, err = f.GetRecords(t.Context(), &awskinesis.GetRecordsInput{ShardIterator: ts.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 1 || aws.ToInt64(out.MillisBehindLatest) != 0 {
			t.Errorf("AT_TIMESTAMP t0+1s: %d records, behind %d; want the second only, caught up", len(out.Records), aws.ToInt64(out.MillisBehindLatest))
		}
	})
}

func TestReshard(t *testing.T) {
	f := newStream(t, 2)
	left, right, err := f.SplitShard("s", "shardId-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.MergeShards("s", left, "shardId-000000000001"); err == nil {
		t.Error("merging shards that are not adjacent: no error")
	}
	child, err := f.MergeShards("s", right, "shardId-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.SplitShard("s", "shardId-000000000000"); err == nil {
		t.Error("splitting a closed shard: no error")
	}
	shards, err := f.Shards("s")
	if err != nil {
		t.Fatal(err)
	}
	type lineage struct{ ID, Parent, Adjacent string }
	var got []lineage
	closed := map[string]bool{}
	for _, s := range shards {
		got = append(got, lineage{aws.ToString(s.ShardId), aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId)})
		closed[aws.ToString(s.ShardId)] = s.SequenceNumberRange.EndingSequenceNumber != nil
	}
	want := []lineage{
		{"shardId-000000000000", "", ""},
		{"shardId-000000000001", "", ""},
		{left, "shardId-000000000000", ""},
		{right, "shardId-000000000000", ""},
		{child, right, "shardId-000000000001"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lineage (-want +got):\n%s", diff)
	}
	wantClosed := map[string]bool{"shardId-000000000000": true, "shardId-000000000001": true, left: false, right: true, child: false}
	if diff := cmp.Diff(wantClosed, closed); diff != "" {
		t.Errorf("closed (-want +got):\n%s", diff)
	}
	// The records of every key go to the open shard whose range holds its hash.
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} {
		shard, _, err := f.Put("s", key, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range shards {
			if aws.ToString(s.ShardId) != shard {
				continue
			}
			h := kinesistest.HashKey(key).String()
			lo, hi := aws.ToString(s.HashKeyRange.StartingHashKey), aws.ToString(s.HashKeyRange.EndingHashKey)
			if closed[shard] || cmpDec(h, lo) < 0 || cmpDec(h, hi) > 0 {
				t.Errorf("key %q (hash %s) put on %s [%s, %s], closed %t", key, h, shard, lo, hi, closed[shard])
			}
		}
	}
}

// cmpDec compares two decimal numbers.
func cmpDec(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestBadInput(t *testing.T) {
	f := newStream(t, 1)
	ctx := t.Context()
	notFound := new(*types.ResourceNotFoundException)
	invalid := new(*types.InvalidArgumentException)
	inUse := new(*types.ResourceInUseException)
	tests := []struct {
		name string
		err  error
		want any
	}{
		{"create a stream twice", f.CreateStream("s", 1), inUse},
		{"create with 0 shards", f.CreateStream("t", 0), invalid},
		{"create with a bad name", f.CreateStream("a b", 1), invalid},
		{"put on a missing stream", func() error { _, _, err := f.Put("missing", "k", nil); return err }(), notFound},
		{"put with an empty key", func() error { _, _, err := f.Put("s", "", nil); return err }(), invalid},
		{"put too much data", func() error { _, _, err := f.Put("s", "k", make([]byte, kinesistest.MaxRecordSize+1)); return err }(), invalid},
		{"split a missing shard", func() error { _, _, err := f.SplitShard("s", "shardId-000000000009"); return err }(), notFound},
		{"split at a key outside", func() error { _, _, err := f.SplitShardAt("s", "shardId-000000000000", "0"); return err }(), invalid},
		{"trim a missing shard", f.Trim("s", "shardId-000000000009", "1"), notFound},
		{"describe nil", func() error { _, err := f.DescribeStreamSummary(ctx, nil); return err }(), invalid},
		{"list nil", func() error { _, err := f.ListShards(ctx, nil); return err }(), invalid},
		{"iterator nil", func() error { _, err := f.GetShardIterator(ctx, nil); return err }(), invalid},
		{"iterator of another stream's ARN", func() error {
			_, err := f.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/missing"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: types.ShardIteratorTypeLatest})
			return err
		}(), notFound},
		{"bad NextToken", func() error {
			_, err := f.ListShards(ctx, &awskinesis.ListShardsInput{NextToken: aws.String("bad")})
			return err
		}(), invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.As(tt.err, tt.want) {
				t.Errorf("error %v, want %T", tt.err, tt.want)
			}
		})
	}
	if _, err := f.GetRecords(ctx, nil); err == nil {
		t.Error("GetRecords(nil): no error")
	}
	arn := "arn:aws:kinesis:us-east-1:000000000000:stream/s"
	out, err := f.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamARN: aws.String(arn)})
	if err != nil || aws.ToString(out.StreamDescriptionSummary.StreamName) != "s" {
		t.Errorf("DescribeStreamSummary by ARN: %v, %v", out, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.ListShards(cancelled, &awskinesis.ListShardsInput{StreamName: aws.String("s")}); !errors.Is(err, context.Canceled) {
		t.Errorf("ListShards with a cancelled ctx: %v", err)
	}
}

func TestPutMany(t *testing.T) {
	f := newStream(t, 4)
	res, err := f.PutMany("s", kinesistest.Entry{PartitionKey: "a", Data: []byte("1")}, kinesistest.Entry{PartitionKey: "a", Data: []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ShardID != res[1].ShardID || res[0].SequenceNumber >= res[1].SequenceNumber || len(res[0].SequenceNumber) != 56 {
		t.Errorf("PutMany: %+v; want one shard, increasing 56-digit numbers", res)
	}
	if _, err := f.PutMany("s", kinesistest.Entry{PartitionKey: "a"}, kinesistest.Entry{}); err == nil {
		t.Error("PutMany with an empty key: no error")
	}
	shards, _ := f.Shards("s")
	total := 0
	for _, s := range shards {
		it := iterAt(t, f, aws.ToString(s.ShardId), types.ShardIteratorTypeTrimHorizon, "")
		out, err := f.GetRecords(t.Context(), &awskinesis.GetRecordsInput{ShardIterator: it})
		if err != nil {
			t.Fatal(err)
		}
		total += len(out.Records)
	}
	if total != 2 {
		t.Errorf("%d records stored, want 2: a failed PutMany stores none", total)
	}
}
