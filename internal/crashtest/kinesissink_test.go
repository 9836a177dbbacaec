//go:build unix

package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/origin"
	kinesissink "github.com/weirstream/weir/sink/kinesis"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// envKinesisSink, set in a child, is the stream the Kinesis sink writes
// to: the child then adds an output putting every record there, its data
// as it is (with the origin tag kinesisSinkOrigin), its partition key
// targetKey. The sink's client marks the child's first PutRecords call
// that returned with the file <out>.sink.put.<pid> and holds the answer
// for markWindow, so that the parent can kill the child inside a batch
// partly written.
const envKinesisSink = "WEIR_CRASHTEST_KINESIS_SINK"

// envKinesisSinkOrigins, "1" in a child with envKinesisSink, gives the
// Kinesis sink's output stream.Origins(): the sink writes version 2 tags,
// which name each record's source position, the same whichever worker of
// a fleet writes it (DESIGN.md, "Tag v2: origins, for a fleet").
const envKinesisSinkOrigins = "WEIR_CRASHTEST_KINESIS_SINK_ORIGINS"

// envKinesisSinkCopies, "1" in a child with envKinesisSink, makes the
// sink's client put again, copyMinDelay to copyMaxDelay later, the records
// one call in copyOneIn wrote: a request that went silent and landed late
// (see putMarkClient.copyLater).
const envKinesisSinkCopies = "WEIR_CRASHTEST_KINESIS_SINK_COPIES"

// The late copies of envKinesisSinkCopies: one call in copyOneIn, put
// again after a delay drawn between the two, around the readers' lease
// duration, so that a reader's lease often moves between a record and its
// copy.
const (
	copyOneIn    = 3
	copyMinDelay = 200 * time.Millisecond
	copyMaxDelay = 2 * leaseDuration
)

// kinesisSinkOrigin is the Kinesis sink's writer name, the same in every
// child.
const kinesisSinkOrigin = "crashtest/out"

// targetKey is the partition key the Kinesis sink writes the record id read
// from the source shard under: the shard is part of it, so that a key's
// records have one order in the source, their shard's.
func targetKey(shard string, id int64) string { return shard + "/" + stateKey(id) }

// addKinesisSink adds the Kinesis sink's output of envKinesisSink to the
// child's pipeline.
func addKinesisSink(recs *stream.Stream[kinesis.Record], cfg pipelineConfig) error {
	client := awskinesis.NewFromConfig(cfg.aws, func(o *awskinesis.Options) { o.BaseEndpoint = aws.String(cfg.kinesisEndpoint) })
	sink, err := kinesissink.New(kinesissink.Config[kinesis.Record]{
		Client: &putMarkClient{Client: client, mark: cfg.sinkMarks + ".put." + strconv.Itoa(os.Getpid()), copies: cfg.kinesisSinkCopies},
		Stream: cfg.kinesisSink,
		Record: func(r kinesis.Record) (string, []byte) {
			id, _ := strconv.ParseInt(string(r.Data), 10, 64)
			return targetKey(r.ShardID, id), r.Data
		},
		Origin: kinesisSinkOrigin,
		// The receiver has leases: the worker's name, the lease owner's,
		// the same in every child of one worker, keeps a replay's version
		// 1 tags the same, and tells a fleet's workers apart.
		Worker: cfg.tuning.withDefaults().worker,
		Logger: cfg.logger,
	})
	if err != nil {
		return err
	}
	opts := []stream.Option{stream.Named("kinesis-sink")}
	if cfg.kinesisSinkOrigins {
		opts = append(opts, stream.Origins())
	}
	stream.ForEachBatch(recs, sink.Write, opts...)
	return nil
}

// putMarkClient marks its first PutRecords call that returned (see
// envKinesisSink), and fails records on purpose, as a throttled shard
// does: a third of that first call's records (never its first one, so
// that the call writes something), and a third of the records of one
// later call in failOneIn. The sink retries them before any later record
// of their keys, so a batch a kill cuts short holds gaps, and its replay
// fails other records: its copies reach the target stream in another
// order than the first writes.
type putMarkClient struct {
	*awskinesis.Client
	mark   string
	marked atomic.Bool
	// copies: with envKinesisSinkCopies, put the records of some calls
	// again, later (copyLater).
	copies bool
}

// failOneIn is how rare a call with failed records is, after the first.
const failOneIn = 8

func (c *putMarkClient) PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, o ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error) {
	failing := !c.marked.Load() || rand.IntN(failOneIn) == 0
	fail := make([]bool, len(in.Records))
	sent := *in
	sent.Records = nil
	for i, e := range in.Records {
		fail[i] = failing && i > 0 && rand.IntN(3) == 0
		if !fail[i] {
			sent.Records = append(sent.Records, e)
		}
	}
	out, err := c.Client.PutRecords(ctx, &sent, o...)
	if err != nil {
		return out, err
	}
	if len(out.Records) != len(sent.Records) {
		return nil, fmt.Errorf("crashtest: %d results for %d records", len(out.Records), len(sent.Records))
	}
	res, failed := make([]types.PutRecordsResultEntry, 0, len(in.Records)), aws.ToInt32(out.FailedRecordCount)
	for i := range in.Records {
		if fail[i] {
			res = append(res, types.PutRecordsResultEntry{ErrorCode: aws.String("ProvisionedThroughputExceededException"),
				ErrorMessage: aws.String("crashtest: failed on purpose")})
			failed++
			continue
		}
		res, out.Records = append(res, out.Records[0]), out.Records[1:]
	}
	out.Records, out.FailedRecordCount = res, aws.Int32(failed)
	if c.copies && rand.IntN(copyOneIn) == 0 {
		// Copied now: the sink may reuse the call's input, and its
		// records' buffers, once the call returned.
		again := &awskinesis.PutRecordsInput{StreamName: cloneString(in.StreamName), StreamARN: cloneString(in.StreamARN)}
		for i, r := range res {
			if r.ErrorCode == nil {
				e := in.Records[i]
				again.Records = append(again.Records, types.PutRecordsRequestEntry{Data: bytes.Clone(e.Data),
					PartitionKey: cloneString(e.PartitionKey), ExplicitHashKey: cloneString(e.ExplicitHashKey)})
			}
		}
		go c.copyLater(again) // ends with its call; a kill of the child ends it too
	}
	if err := markFirst(&c.marked, c.mark); err != nil {
		return nil, err
	}
	return out, nil
}

// copyLater puts again, after a delay drawn between copyMinDelay and
// copyMaxDelay, the records a call wrote (again, a copy of them): a copy
// of each that a request which went silent, and which the sink retried,
// leaves when it lands late. The records were acknowledged, so a reader
// through Deduplicate must drop every copy, whichever shard of a reshard
// or which worker of a fleet reads it. A failed copy is no loss: the
// first one is in the stream.
func (c *putMarkClient) copyLater(again *awskinesis.PutRecordsInput) {
	if len(again.Records) == 0 {
		return
	}
	time.Sleep(copyMinDelay + rand.N(copyMaxDelay-copyMinDelay))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, _ = c.Client.PutRecords(ctx, again)
}

// cloneString returns a pointer to a copy of *s, or nil.
func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	return aws.String(strings.Clone(*s))
}

// TestCrashTortureKinesisSink is the torture test of the Kinesis sink with
// origin tags (DESIGN.md, "Writing to Kinesis"): the child copies every
// record of the source stream to a target stream, and is killed in turn
// right after its first PutRecords call returned (inside a batch partly
// written, which the restart writes again whole) and at a random moment,
// and restarted each time with its recovery log; some of its records fail
// on purpose (see putMarkClient), so that a batch is written out of index
// order. After the last child
// drained, the whole target stream, each shard from its start through
// origin.Filter in shard order, must be what one uninterrupted run writes:
// every record delivered exactly once, each partition key's records in
// their source order. The copies the filter dropped are counted and
// logged: the stream holds some whenever a kill landed inside the sink's
// output, as the kills after a first call nearly always do. The output file is checked as in TestCrashTorture.
func TestCrashTortureKinesisSink(t *testing.T) {
	kills, seed, rng := tortureSchedule(t)
	start := time.Now()
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true, DataDir: t.TempDir()})
	h := newHarness(t, env, 2)
	h.kinesisSink = h.stream + "-out"
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := env.CreateStream(ctx, h.kinesisSink, 3); err != nil {
		t.Fatal(err)
	}
	f, inSink, random := h.sinkTorture(kills, rng, "put")

	delivered := map[int64]bool{}
	if _, err := scanRecords(h.out, 0, delivered); err != nil {
		t.Fatal(err)
	}
	// want is every record delivered, per target key, in source order.
	want := map[string][]int64{}
	undelivered := 0
	for shard, recs := range readStream(t, env.Kinesis(), h.stream) {
		for _, r := range recs {
			id, err := strconv.ParseInt(string(r.Data), 10, 64)
			if err != nil {
				t.Fatalf("source record %q: %v", r.Data, err)
			}
			if !delivered[id] {
				undelivered++
				continue
			}
			want[targetKey(shard, id)] = append(want[targetKey(shard, id)], id)
		}
	}
	got := map[string][]int64{}
	raw, kept := 0, 0
	for shard, recs := range readStream(t, env.Kinesis(), h.kinesisSink) {
		keep := originFilter()
		for _, r := range recs {
			raw++
			payload, ok, err := keep(r.Data)
			if err != nil {
				t.Fatalf("target shard %s, record %s: %v", shard, aws.ToString(r.SequenceNumber), err)
			}
			if !ok {
				continue
			}
			kept++
			id, err := strconv.ParseInt(string(payload), 10, 64)
			if err != nil {
				t.Fatalf("target record %q: %v", payload, err)
			}
			got[aws.ToString(r.PartitionKey)] = append(got[aws.ToString(r.PartitionKey)], id)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("target stream after the filter, records per partition key in stream order (-want source order +got):\n%s", diff)
	}
	report(t, fmt.Sprintf("Kinesis sink torture: %d kills (%d inside the sink's output, %d random), seed %d: %v; target stream %d records, %d after the filter (%d copies dropped); %d source records not delivered; took %v",
		kills, inSink, random, seed, f, raw, kept, raw-kept, undelivered, time.Since(start).Round(time.Millisecond)))
	if raw == kept {
		// Not an error: a kill after the first call of a batch that
		// fit in one call, or one during a replay's first call, leaves
		// nothing to drop. Over seeds most runs drop some.
		t.Logf("no copies in the target stream: no kill landed inside a batch partly written (seed %d)", seed)
	}
	if undelivered > 0 {
		t.Errorf("%d records of the source stream were not delivered after the drain", undelivered)
	}
}

// originFilter returns a function that decodes a target record's origin tag
// and reports, with its payload, whether an origin.Filter of one shard,
// given the shard's records in order, keeps it: the one place this test
// knows the tag's API.
func originFilter() func(data []byte) (payload []byte, keep bool, err error) {
	f := origin.NewFilter(0)
	return func(data []byte) ([]byte, bool, error) {
		tag, payload, ok, err := origin.Decode(data)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return nil, false, fmt.Errorf("record %q has no origin tag", data)
		}
		return payload, f.Keep(tag), nil
	}
}

// readStream returns every record of every shard of the stream name, each
// shard's in order from its start to its end.
func readStream(t *testing.T, client *awskinesis.Client, name string) map[string][]types.Record {
	t.Helper()
	ctx := t.Context()
	out := map[string][]types.Record{}
	in := &awskinesis.ListShardsInput{StreamName: aws.String(name)}
	for {
		shards, err := client.ListShards(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range shards.Shards {
			it, err := client.GetShardIterator(ctx, &awskinesis.GetShardIteratorInput{StreamName: aws.String(name),
				ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			recs := []types.Record{}
			for iter := it.ShardIterator; iter != nil; {
				page, err := client.GetRecords(ctx, &awskinesis.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Records) == 0 {
					break // an open shard's end
				}
				recs = append(recs, page.Records...)
				iter = page.NextShardIterator
			}
			out[aws.ToString(sh.ShardId)] = recs
		}
		if shards.NextToken == nil {
			return out
		}
		in = &awskinesis.ListShardsInput{NextToken: shards.NextToken}
	}
}
