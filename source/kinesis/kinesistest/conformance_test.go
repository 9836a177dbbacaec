package kinesistest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
)

// servers is one kinesalite for the conformance tests, the reference the
// fake is compared with.
var servers = localaws.NewShared(localaws.Options{
	Kinesis: true,
	Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
})

// mockServers is one kinesis-mock, the reference for what kinesalite does
// not do as Kinesis does (ListShards ignores MaxResults).
var mockServers = localaws.NewShared(localaws.Options{
	KinesisMock: true,
	Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
})

func TestMain(m *testing.M) {
	code := servers.Run(m)
	if err := mockServers.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close kinesis-mock: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// target is a Kinesis a scenario runs on: the fake or kinesalite.
type target struct {
	c      kinesis.Client
	create func(t *testing.T, stream string, shards int)
	put    func(t *testing.T, stream string, keys ...string) // data is "data-" + key
	split  func(t *testing.T, stream, shard, hashKey string)
}

func fakeTarget() target {
	f := kinesistest.New()
	return target{
		c: f,
		create: func(t *testing.T, stream string, shards int) {
			t.Helper()
			if err := f.CreateStream(stream, shards); err != nil {
				t.Fatal(err)
			}
		},
		put: func(t *testing.T, stream string, keys ...string) {
			t.Helper()
			for _, k := range keys {
				if _, _, err := f.Put(stream, k, []byte("data-"+k)); err != nil {
					t.Fatal(err)
				}
			}
		},
		split: func(t *testing.T, stream, shard, hashKey string) {
			t.Helper()
			if _, _, err := f.SplitShardAt(stream, shard, hashKey); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// serverTarget is a target on a local server through client c.
func serverTarget(c *awskinesis.Client) target {
	return target{
		c: c,
		create: func(t *testing.T, stream string, shards int) {
			t.Helper()
			if err := localaws.CreateStreamOn(t.Context(), c, stream, shards); err != nil {
				t.Fatal(err)
			}
		},
		put: func(t *testing.T, stream string, keys ...string) {
			t.Helper()
			data := make([][]byte, len(keys))
			for i, k := range keys {
				data[i] = []byte("data-" + k)
			}
			if err := localaws.PutRecordsOn(t.Context(), c, stream, data, func(i int) string { return keys[i] }); err != nil {
				t.Fatal(err)
			}
		},
		split: func(t *testing.T, stream, shard, hashKey string) {
			t.Helper()
			if _, err := c.SplitShard(t.Context(), &awskinesis.SplitShardInput{
				StreamName: aws.String(stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(hashKey),
			}); err != nil {
				t.Fatal(err)
			}
			waitActive(t, c, stream)
		},
	}
}

// waitActive asks kinesalite until the stream is ACTIVE again after a
// reshard: a server-side change has nothing to wait on (ctx bounds it).
func waitActive(t *testing.T, c *awskinesis.Client, stream string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		out, err := c.DescribeStreamSummary(ctx, &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		if out.StreamDescriptionSummary.StreamStatus == types.StreamStatusActive {
			return
		}
	}
}

// transcript is what a scenario observed, in terms both servers must agree
// on (no raw sequence numbers or iterators: those differ by design).
type transcript []string

func (tr *transcript) add(format string, args ...any) {
	*tr = append(*tr, fmt.Sprintf(format, args...))
}

// code returns the API error code of err, "" for nil.
func code(err error) string {
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return "untyped: " + err.Error()
}

// client wraps a target's client with the calls scenarios make.
type client struct {
	t      *testing.T
	c      kinesis.Client
	stream string
}

// iter gets an iterator; it returns "" and the error code on failure.
func (c client) iter(shard string, typ types.ShardIteratorType, seq string, ts *time.Time) (string, string) {
	in := &awskinesis.GetShardIteratorInput{StreamName: aws.String(c.stream), ShardId: aws.String(shard), ShardIteratorType: typ, Timestamp: ts}
	if seq != "" {
		in.StartingSequenceNumber = aws.String(seq)
	}
	out, err := c.c.GetShardIterator(c.t.Context(), in)
	if err != nil {
		return "", code(err)
	}
	return aws.ToString(out.ShardIterator), ""
}

// page is one GetRecords answer, reduced to what both servers agree on.
type page struct {
	data    []string
	seqs    []string
	next    *string
	caught  bool // MillisBehindLatest == 0
	errCode string
}

func (c client) read(it string, limit int32) page {
	in := &awskinesis.GetRecordsInput{ShardIterator: aws.String(it)}
	if limit != 0 {
		in.Limit = aws.Int32(limit)
	}
	out, err := c.c.GetRecords(c.t.Context(), in)
	if err != nil {
		return page{errCode: code(err)}
	}
	p := page{next: out.NextShardIterator, caught: aws.ToInt64(out.MillisBehindLatest) == 0}
	for _, r := range out.Records {
		p.data = append(p.data, string(r.Data))
		p.seqs = append(p.seqs, aws.ToString(r.SequenceNumber))
	}
	return p
}

// String is the page as a transcript line, with checks of its sequence
// numbers (56 digits, increasing) instead of their values.
func (p page) String() string {
	if p.errCode != "" {
		return "error " + p.errCode
	}
	ok := true
	for i, s := range p.seqs {
		ok = ok && len(s) == 56 && batch.ValidateSeq(s) == nil && (i == 0 || batch.CompareSeq(p.seqs[i-1], s) < 0)
	}
	return fmt.Sprintf("records %v next=%t seqs56increasing=%t", p.data, p.next != nil, ok)
}

func (c client) shards() []types.Shard {
	out, err := c.c.ListShards(c.t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(c.stream)})
	if err != nil {
		c.t.Fatal(err)
	}
	return out.Shards
}

func keys(prefix string, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return ks
}

const shard0 = "shardId-000000000000"

// scenarios run on both targets; each returns its transcript.
var scenarios = []struct {
	name string
	mock bool // compared with kinesis-mock instead of kinesalite
	run  func(t *testing.T, tg target, c client, tr *transcript)
}{
	{"iterator types", false, func(t *testing.T, tg target, c client, tr *transcript) {
		tg.create(t, c.stream, 2)
		tg.put(t, c.stream, keys("k", 20)...)
		before := time.Now().Add(-time.Hour)
		for _, s := range c.shards() {
			id := aws.ToString(s.ShardId)
			it, _ := c.iter(id, types.ShardIteratorTypeTrimHorizon, "", nil)
			all := c.read(it, 100)
			tr.add("%s TRIM_HORIZON: %v caught=%t", id, all, all.caught)
			it, _ = c.iter(id, types.ShardIteratorTypeAtTimestamp, "", &before)
			tr.add("%s AT_TIMESTAMP before: %v", id, c.read(it, 100))
			if len(all.seqs) < 3 {
				t.Fatalf("shard %s holds %d records; the scenario wants 3", id, len(all.seqs))
			}
			it, _ = c.iter(id, types.ShardIteratorTypeAtSequenceNumber, all.seqs[2], nil)
			tr.add("%s AT_SEQUENCE_NUMBER third: %v", id, c.read(it, 100))
			it, _ = c.iter(id, types.ShardIteratorTypeAfterSequenceNumber, all.seqs[2], nil)
			tr.add("%s AFTER_SEQUENCE_NUMBER third: %v", id, c.read(it, 100))
			it, _ = c.iter(id, types.ShardIteratorTypeAfterSequenceNumber, all.seqs[len(all.seqs)-1], nil)
			tr.add("%s AFTER_SEQUENCE_NUMBER last: %v", id, c.read(it, 100))
			tr.add("%s starting seq <= first: %t", id, batch.CompareSeq(aws.ToString(s.SequenceNumberRange.StartingSequenceNumber), all.seqs[0]) <= 0)
		}
		latest, _ := c.iter(shard0, types.ShardIteratorTypeLatest, "", nil)
		first := c.read(latest, 100)
		tr.add("LATEST before puts: %v", first)
		tg.put(t, c.stream, keys("late", 10)...)
		tr.add("LATEST iterator after puts: %v", c.read(latest, 100))
		tr.add("its next iterator after puts: %v", c.read(aws.ToString(first.next), 100))
	}},
	{"limit and paging", false, func(t *testing.T, tg target, c client, tr *transcript) {
		tg.create(t, c.stream, 1)
		tg.put(t, c.stream, keys("p", 25)...)
		it, _ := c.iter(shard0, types.ShardIteratorTypeTrimHorizon, "", nil)
		for range 4 {
			p := c.read(it, 10)
			tr.add("page: %v", p)
			it = aws.ToString(p.next)
		}
		it, _ = c.iter(shard0, types.ShardIteratorTypeTrimHorizon, "", nil)
		tr.add("default limit: %v", c.read(it, 0))
		for _, limit := range []int32{-1, 0, 10001} {
			tr.add("limit %d: %v", limit, c.read(it, limit))
		}
		tr.add("limit 10000: %v", c.read(it, 10000))
	}},
	{"bad input", false, func(t *testing.T, tg target, c client, tr *transcript) {
		tg.create(t, c.stream, 2)
		tg.put(t, c.stream, keys("b", 10)...)
		tr.add("bad iterator: %v", c.read("not-an-iterator", 10))
		_, e := c.iter("shardId-000000000009", types.ShardIteratorTypeTrimHorizon, "", nil)
		tr.add("unknown shard: %s", e)
		_, e = c.iter(shard0, types.ShardIteratorTypeAtSequenceNumber, "", nil)
		tr.add("AT_SEQUENCE_NUMBER without a number: %s", e)
		_, e = c.iter(shard0, types.ShardIteratorTypeAtTimestamp, "", nil)
		tr.add("AT_TIMESTAMP without a time: %s", e)
		_, e = c.iter(shard0, "SIDEWAYS", "", nil)
		tr.add("unknown type: %s", e)
		it, _ := c.iter("shardId-000000000001", types.ShardIteratorTypeTrimHorizon, "", nil)
		other := c.read(it, 1)
		_, e = c.iter(shard0, types.ShardIteratorTypeAtSequenceNumber, other.seqs[0], nil)
		tr.add("another shard's number: %s", e)
		_, err := c.c.DescribeStreamSummary(t.Context(), &awskinesis.DescribeStreamSummaryInput{StreamName: aws.String(c.stream + "-missing")})
		tr.add("missing stream: %s", code(err))
		_, err = c.c.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(c.stream + "-missing")})
		tr.add("missing stream's shards: %s", code(err))
		_, err = c.c.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(c.stream), MaxResults: aws.Int32(0)})
		tr.add("MaxResults 0: %s", code(err)) // kinesis-mock: UnknownError
		c2 := c
		c2.stream += "-missing"
		_, e = c2.iter(shard0, types.ShardIteratorTypeTrimHorizon, "", nil)
		tr.add("missing stream's iterator: %s", e)
	}},
	{"list shards pages", true, func(t *testing.T, tg target, c client, tr *transcript) {
		tg.create(t, c.stream, 5)
		in := &awskinesis.ListShardsInput{StreamName: aws.String(c.stream), MaxResults: aws.Int32(2)}
		for {
			out, err := c.c.ListShards(t.Context(), in)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, s := range out.Shards {
				ids = append(ids, aws.ToString(s.ShardId)+" "+aws.ToString(s.HashKeyRange.StartingHashKey)+".."+aws.ToString(s.HashKeyRange.EndingHashKey))
			}
			tr.add("page %v more=%t", ids, out.NextToken != nil)
			if out.NextToken == nil {
				break
			}
			in = &awskinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(2)}
		}
		out, err := c.c.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(c.stream), ExclusiveStartShardId: aws.String("shardId-000000000002")})
		tr.add("after shard 2: %d shards %s", len(out.Shards), code(err))
		_, err = c.c.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(c.stream), NextToken: aws.String("x")})
		tr.add("NextToken with StreamName: %s", code(err))
	}},
	{"shard end after split", false, func(t *testing.T, tg target, c client, tr *transcript) {
		tg.create(t, c.stream, 1)
		tg.put(t, c.stream, keys("s", 6)...)
		parent := c.shards()[0]
		lo, _ := new(big.Int).SetString(aws.ToString(parent.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(parent.HashKeyRange.EndingHashKey), 10)
		mid := new(big.Int).Add(lo, hi)
		mid.Rsh(mid, 1).Add(mid, big.NewInt(1))
		it, _ := c.iter(shard0, types.ShardIteratorTypeTrimHorizon, "", nil)
		pre := c.read(it, 2) // an iterator from before the split
		tg.split(t, c.stream, shard0, mid.String())
		tg.put(t, c.stream, keys("t", 12)...)
		tr.add("pre-split iterator continues: %v", c.read(aws.ToString(pre.next), 100))
		it, _ = c.iter(shard0, types.ShardIteratorTypeTrimHorizon, "", nil)
		all := c.read(it, 100)
		tr.add("parent: %v", all)
		latest, _ := c.iter(shard0, types.ShardIteratorTypeLatest, "", nil)
		tr.add("parent LATEST: %v", c.read(latest, 100))
		for _, s := range c.shards() {
			id := aws.ToString(s.ShardId)
			end := aws.ToString(s.SequenceNumberRange.EndingSequenceNumber)
			tr.add("shard %s parent=%q adjacent=%q closed=%t range %s..%s", id, aws.ToString(s.ParentShardId), aws.ToString(s.AdjacentParentShardId),
				end != "", aws.ToString(s.HashKeyRange.StartingHashKey), aws.ToString(s.HashKeyRange.EndingHashKey))
			if end != "" {
				tr.add("ending seq >= last record: %t", batch.CompareSeq(end, all.seqs[len(all.seqs)-1]) >= 0)
				continue
			}
			it, _ := c.iter(id, types.ShardIteratorTypeTrimHorizon, "", nil)
			p := c.read(it, 100)
			tr.add("child %s: %v starts after the parent's records: %t", id, p, len(p.seqs) > 0 && batch.CompareSeq(p.seqs[0], all.seqs[len(all.seqs)-1]) > 0)
		}
	}},
}

// TestConformance runs every scenario on kinesalite (kinesis-mock for
// ListShards paging, which kinesalite ignores) and on the fake, and wants
// the same transcript from both.
func TestConformance(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			stream := localaws.UniqueName(t)
			var want, got transcript
			server, ref := "kinesalite", servers.Env(t).Kinesis()
			if sc.mock {
				server, ref = "kinesis-mock", mockServers.Env(t).KinesisMock()
			}
			real := serverTarget(ref)
			sc.run(t, real, client{t: t, c: real.c, stream: stream}, &want)
			fake := fakeTarget()
			sc.run(t, fake, client{t: t, c: fake.c, stream: stream}, &got)
			if len(want) == 0 {
				t.Fatalf("%s's transcript is empty", server)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the fake differs from %s (-%s +fake):\n%s", server, server, diff)
			}
			t.Log(strings.Join(got, "\n"))
		})
	}
}
