//go:build unix

package crashtest

import (
	"cmp"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	gocmp "github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// envSinkOrigins, "1" in a child with envSink, makes the DynamoDB sink's
// output the fleet's (addFleetSink) instead of addSink's two: one update
// per record of its bucket's item, with stream.Origins().
const envSinkOrigins = "WEIR_CRASHTEST_SINK_ORIGINS"

// bucketBits is the number of leading bits of a partition key's MD5 hash,
// the hash Kinesis places a record by, that name its bucket (sinkBucket):
// 64 buckets, each a 64th of the hash key space. The 4 shards kinesalite
// creates each hold 16 whole buckets, and the halves of a split at a
// shard's middle (splitShard) 8 each: a bucket's records are in one shard
// and then in its descendants, never in two shards at once.
const bucketBits = 6

// sinkBucket returns the item the fleet's DynamoDB sink writes a record of
// partition key pk to: "b" and its bucket's number, two digits.
func sinkBucket(pk string) string {
	sum := md5.Sum([]byte(pk))
	return fmt.Sprintf("b%02d", sum[0]>>(8-bucketBits))
}

// lostOneIn is how rare an update applied whose answer the fleet sink's
// client loses is (see lostAnswerClient).
const lostOneIn = 10

// errLostAnswer is the error of an update lostAnswerClient applied and
// then failed.
var errLostAnswer = errors.New("crashtest: update applied, its answer lost on purpose")

// lostAnswerClient is the fleet sink's DynamoDB client: one applied update
// in lostOneIn returns errLostAnswer instead of its answer, as a call whose
// answer a broken connection lost does. The sink retries it, and its
// version must make DynamoDB skip it as applied.
type lostAnswerClient struct {
	*awsdynamodb.Client
}

func (c lostAnswerClient) UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, o ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, o...)
	if err == nil && rand.IntN(lostOneIn) == 0 {
		return nil, errLostAnswer
	}
	return out, err
}

// addFleetSink adds the fleet's DynamoDB sink output of envSinkOrigins to
// the child's pipeline: with stream.Origins(), each record's update of
// the item of its bucket (sinkBucket) adds 1 to hits, sets last to the
// record's ID and appends the ID to the list ids, through
// lostAnswerClient. Applied once per record in shard order, an item holds
// its bucket's records exactly: their number, the last one, and all of
// them in order.
func addFleetSink(recs *stream.Stream[kinesis.Record], cfg pipelineConfig) error {
	client := awsdynamodb.NewFromConfig(cfg.aws, func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(cfg.dynamoEndpoint) })
	num := func(s string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: s} }
	sink, err := dynamodb.New(context.Background(), dynamodb.Config{Client: lostAnswerClient{client}, Table: cfg.sink, Logger: cfg.logger},
		func(r kinesis.Record) (dynamodb.Write, error) {
			id := string(r.Data)
			if _, err := strconv.ParseInt(id, 10, 64); err != nil {
				return dynamodb.Write{}, fmt.Errorf("crashtest: record %s of shard %s: data %q: %w", r.SequenceNumber, r.ShardID, r.Data, err)
			}
			return dynamodb.Write{
				Key:    map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: sinkBucket(r.PartitionKey)}},
				Update: "SET #last = :id, #ids = list_append(if_not_exists(#ids, :none), :ids) ADD #hits :one",
				Names:  map[string]string{"#last": "last", "#ids": "ids", "#hits": "hits"},
				Values: map[string]ddbtypes.AttributeValue{
					":id": num(id), ":one": num("1"),
					":ids":  &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{num(id)}},
					":none": &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{}},
				},
			}, nil
		})
	if err != nil {
		return err
	}
	stream.ForEachBatch(recs, sink.Write, stream.Named("sink-buckets"), stream.Origins())
	return nil
}

// fleetDynamoPuts is the number of records TestFleetDynamoSinkTorture's
// producer puts every 20ms: 150 a second, which the fleet writes, one call
// a record, about as fast as they come on 2 cores under -race, so that the
// wait for the split's children and the drain stay short (at 500 a
// second, the default, the test took 40 s under -race).
const fleetDynamoPuts = 3

// bucketItem is an item of the fleet sink's table (see addFleetSink).
type bucketItem struct {
	Hits, Last int64
	IDs        []int64
}

// TestFleetDynamoSinkTorture is the fleet torture test of sink/dynamodb
// with origins (DESIGN.md, "Exactly-once outputs", "On a fleet: versions
// of origin"): 3 worker processes (the crash test's child pipeline, each
// with its own worker ID, recovery log and output file) share a 4-shard
// source stream through the lease table and write every record with
// ForEachBatch(recs, sink.Write, stream.Origins()) as an update of the
// item of its bucket (addFleetSink: a count, the last ID, the list of
// IDs), one update in lostOneIn losing its answer after it was applied
// (lostAnswerClient), while a producer keeps putting records. Workers are
// killed, restarted, paused and let go on as in
// TestFleetKinesisSinkTorture (WEIR_TORTURE_KILLS, default 2;
// WEIR_FLEET_PAUSES, default 1; their order and moments drawn from
// WEIR_TORTURE_SEED, every other one inside a batch's sink output), and a
// source shard is split during the first pause, one the paused worker
// held (sinkFleet.pauseAcrossSplit): the zombie's batch in flight writes
// the parent's records after the others wrote the children's, which the
// lineage of the children's versions must refuse. With WEIR_FLEET_MERGE=1
// (some 35 s instead of 20, so not in the default run; it replaces the
// zombie), that pause is the first event, and the paused worker is killed
// instead of let go on, the children merged again (sinkFleet.merge), and
// the worker restarted with its log once the others completed batches of
// the merged shard: its recovery runs its batches of the parent again
// after the merged shard wrote their items, a grandparent's late writes
// after a grandchild's, which the merged shard's lineage must refuse too
// (TestReshardedGrandparentReplaySkipped in sink/dynamodb is the default
// run's). Then the producer stops, the fleet checkpoints every source shard at its end, and every
// worker gets SIGTERM and must drain and exit 0.
//
// The check is the documented promise: each bucket's item holds exactly
// what one pass over the source stream writes, each update applied once
// in shard order (a parent's records before its children's): its count of
// records, its last record, and the list of them. The output files must
// hold every record (G1), and no checkpoint may pass its worker's
// completed records or be written by a worker that lost its lease.
func TestFleetDynamoSinkTorture(t *testing.T) {
	kills, pauses, seed, rng := sinkFleetSchedule(t)
	start := time.Now()
	env := servers.Env(t)
	h := newHarness(t, env, fleetShards)
	h.sink, h.sinkOrigins = createSinkTable(t, env), true
	h.puts = fleetDynamoPuts
	fl := newSinkFleet(h, "dsink-w")
	fl.pauseAcrossSplit, fl.merge = true, os.Getenv("WEIR_FLEET_MERGE") == "1"
	f, inSink := fl.runOnSource(kills, pauses, rng)

	wantIDs, source := bucketsOfSource(t, env, h.stream)
	want := map[string]bucketItem{}
	for b, ids := range wantIDs {
		want[b] = bucketItem{Hits: int64(len(ids)), Last: ids[len(ids)-1], IDs: ids}
	}
	got := readBuckets(t, env.DynamoDB(), h.sink)
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("the sink's items, by bucket (-want one pass over the source +got):\n%s", diff)
		gotIDs := map[string][]int64{}
		for b, it := range got {
			gotIDs[b] = it.IDs
		}
		reportOnce(t, wantIDs, gotIDs)
	}
	if inSink > 0 && f.Duplicates == 0 {
		t.Errorf("%d events inside a batch's sink output and no record processed twice: no write was made again, the test does not test the versions", inSink)
	}
	merged := ""
	if fl.merge {
		merged = " and a merge of its children while the paused worker was dead"
	}
	report(t, fmt.Sprintf("fleet DynamoDB sink torture: %d workers, %d kills, %d pauses (%d inside the sink's output), a split of the source during a pause%s, seed %d: %v; source %d records in %d items; took %v",
		fleetWorkers, kills, pauses, inSink, merged, seed, f, source, len(got), time.Since(start).Round(time.Millisecond)))
}

// bucketsOfSource returns the IDs of the records of the stream name by
// bucket (sinkBucket of their partition keys), each bucket's in shard
// order: a parent shard's before its children's. It fails t if a bucket's
// records are in two shards of one generation, which would order nothing
// (a test bug: see bucketBits). It returns the number of records too.
func bucketsOfSource(t *testing.T, env *localaws.Env, name string) (map[string][]int64, int) {
	t.Helper()
	byShard := readStream(t, env.Kinesis(), name)
	depth := shardDepths(t, env, name)
	shards := slices.SortedFunc(maps.Keys(byShard), func(a, b string) int {
		return cmp.Or(cmp.Compare(depth[a], depth[b]), cmp.Compare(a, b))
	})
	ids, in := map[string][]int64{}, map[string]string{} // in: the shard of a bucket's last record so far
	n := 0
	for _, shard := range shards {
		for _, r := range byShard[shard] {
			id, err := strconv.ParseInt(string(r.Data), 10, 64)
			if err != nil {
				t.Fatalf("source record %q: %v", r.Data, err)
			}
			b := sinkBucket(aws.ToString(r.PartitionKey))
			if prev, ok := in[b]; ok && prev != shard && depth[prev] == depth[shard] {
				t.Fatalf("bucket %s has records in shards %s and %s, of one generation: a test bug (see bucketBits)", b, prev, shard)
			}
			in[b] = shard
			ids[b] = append(ids[b], id)
			n++
		}
	}
	return ids, n
}

// shardDepths returns the generation of every shard of the stream name: 0
// for a shard without parents, else one more than its parents' greatest.
func shardDepths(t *testing.T, env *localaws.Env, name string) map[string]int {
	t.Helper()
	parents := map[string][]string{}
	in := &awskinesis.ListShardsInput{StreamName: aws.String(name)}
	for in != nil {
		page, err := env.Kinesis().ListShards(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		in = nil
		if page.NextToken != nil {
			in = &awskinesis.ListShardsInput{NextToken: page.NextToken}
		}
		for _, s := range page.Shards {
			id := aws.ToString(s.ShardId)
			parents[id] = []string{}
			for _, ps := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
				if ps != nil {
					parents[id] = append(parents[id], *ps)
				}
			}
		}
	}
	depth := map[string]int{}
	var of func(shard string) int
	of = func(shard string) int {
		if d, ok := depth[shard]; ok {
			return d
		}
		d := 0
		for _, ps := range parents[shard] {
			if _, listed := parents[ps]; listed { // a parent trimmed away is no generation
				d = max(d, of(ps)+1)
			}
		}
		depth[shard] = d
		return d
	}
	for shard := range parents {
		of(shard)
	}
	return depth
}

// readBuckets returns the items of the fleet sink's table (see
// addFleetSink), by bucket.
func readBuckets(t *testing.T, client *awsdynamodb.Client, table string) map[string]bucketItem {
	t.Helper()
	num := func(b string, v ddbtypes.AttributeValue) int64 {
		n, ok := v.(*ddbtypes.AttributeValueMemberN)
		if !ok {
			t.Fatalf("item %s: %v is not a number", b, v)
		}
		x, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			t.Fatalf("item %s: %v", b, err)
		}
		return x
	}
	got := map[string]bucketItem{}
	for _, item := range scanTable(t, client, table) {
		k, _ := item["id"].(*ddbtypes.AttributeValueMemberS)
		l, _ := item["ids"].(*ddbtypes.AttributeValueMemberL)
		if k == nil || l == nil {
			t.Fatalf("item %v: want a string id and a list ids", item)
		}
		it := bucketItem{Hits: num(k.Value, item["hits"]), Last: num(k.Value, item["last"])}
		for _, v := range l.Value {
			it.IDs = append(it.IDs, num(k.Value, v))
		}
		got[k.Value] = it
	}
	return got
}
