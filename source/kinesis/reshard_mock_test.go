package kinesis

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/internal/kpl"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
)

// TestUpdateShardCountOnKinesisMock reshards with UpdateShardCount, which
// kinesalite lacks. kinesis-mock is slow to put to: the stream stays small.
func TestUpdateShardCountOnKinesisMock(t *testing.T) {
	t.Parallel()
	env := mockServers.Env(t)
	client := env.KinesisMock()
	stream := localaws.UniqueName(t)
	if err := localaws.CreateStreamOn(t.Context(), client, stream, 2); err != nil {
		t.Fatal(err)
	}
	data := payloads("u", 600)
	if err := localaws.PutRecordsOn(t.Context(), client, stream, data[:300], nil); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(env, stream)
	cfg.AWS, cfg.Endpoint, cfg.Client = nil, "", env.KinesisMock(func(o *awskinesis.Options) { o.Retryer = aws.NopRetryer{} })
	run := startReceiver(t, cfg, len(data))
	if _, err := client.UpdateShardCount(t.Context(), &awskinesis.UpdateShardCountInput{
		StreamName: aws.String(stream), TargetShardCount: aws.Int32(4), ScalingType: types.ScalingTypeUniformScaling,
	}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, client, stream)
	if err := localaws.PutRecordsOn(t.Context(), client, stream, data[300:], nil); err != nil {
		t.Fatal(err)
	}
	run.wait(t)
	run.stop(t)

	got := run.c.records()
	checkExactlyOnce(t, data, got)
	checkShardOrder(t, got)
	blocks := run.c.snapshot()
	checkRanges(t, stream, blocks)
	checkLineage(t, t.Context(), client, stream, blocks)
	checkRecompute(t, run.r, blocks)
}

// TestKPLAggregatesAfterSplitOnKinesisMock plays a KPL whose shard map
// still predicts the parent after a split: each aggregate it built for the
// parent holds user records of both children, and lands, by its explicit
// hash key (its first user record's, as the KPL sets it), on one child.
// As the KPL does (retrier.cc), the test then puts again, aggregated for
// the right child, the user records the child it landed on does not hold.
// Every user record must arrive exactly once: each child delivers only the
// user records in its hash key range (issue 18, item 14), and recomputed
// blocks hold the same records.
func TestKPLAggregatesAfterSplitOnKinesisMock(t *testing.T) {
	t.Parallel()
	env := mockServers.Env(t)
	client := env.KinesisMock()
	for _, fanOut := range []bool{false, true} {
		t.Run(map[bool]string{false: "polling", true: "fan-out"}[fanOut], func(t *testing.T) {
			stream := localaws.UniqueName(t)
			if err := localaws.CreateStreamOn(t.Context(), client, stream, 1); err != nil {
				t.Fatal(err)
			}
			cfg := baseConfig(env, stream)
			cfg.AWS, cfg.Endpoint, cfg.Client = nil, "", env.KinesisMock(func(o *awskinesis.Options) { o.Retryer = aws.NopRetryer{} })
			if fanOut {
				m := &mockFanOut{env: env, client: client}
				cfg = m.config(stream, m.newSpy(0))
			}
			checkKPLAfterSplit(t, client, stream, cfg)
		})
	}
}

// checkKPLAfterSplit splits the one shard of stream, puts KPL aggregates
// as TestKPLAggregatesAfterSplitOnKinesisMock says, and checks what a
// receiver of cfg delivers and recomputes.
func checkKPLAfterSplit(t *testing.T, client *awskinesis.Client, stream string, cfg Config) {
	splitInHalf(t, client, stream)
	children := openShards(t, client, stream)
	if len(children) != 2 {
		t.Fatalf("split made %d open shards, want 2", len(children))
	}
	inShard := func(s types.Shard, key *big.Int) bool {
		lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
		return key.Cmp(lo) >= 0 && key.Cmp(hi) <= 0
	}
	shardOf := func(key *big.Int) types.Shard {
		for _, s := range children {
			if inShard(s, key) {
				return s
			}
		}
		t.Fatalf("no child holds hash key %s", key)
		return types.Shard{}
	}
	putAggregate := func(urs []kpl.UserRecord) string {
		out, err := client.PutRecord(t.Context(), &awskinesis.PutRecordInput{
			StreamName: aws.String(stream), Data: kpl.Aggregate(urs),
			PartitionKey: aws.String("a"), ExplicitHashKey: aws.String(kinesistest.HashKey(urs[0].PartitionKey).String()),
		})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ShardId)
	}

	const aggregates, perAggregate = 12, 10
	var want [][]byte
	var again []kpl.UserRecord // the user records that landed on the wrong child
	for a := range aggregates {
		urs := make([]kpl.UserRecord, perAggregate)
		for u := range urs {
			key := fmt.Sprintf("key-%d-%d", a, u)
			urs[u] = kpl.UserRecord{PartitionKey: key, Data: []byte(key)}
			want = append(want, urs[u].Data)
		}
		landed := putAggregate(urs)
		for _, ur := range urs {
			if aws.ToString(shardOf(kinesistest.HashKey(ur.PartitionKey)).ShardId) != landed {
				again = append(again, ur)
			}
		}
	}
	if len(again) == 0 || len(again) == len(want) {
		t.Fatalf("%d of %d user records landed on the wrong child: the test needs some of both", len(again), len(want))
	}
	for _, s := range children { // put again, aggregated for the right child
		var urs []kpl.UserRecord
		for _, ur := range again {
			if inShard(s, kinesistest.HashKey(ur.PartitionKey)) {
				urs = append(urs, ur)
			}
		}
		if len(urs) > 0 {
			if got := putAggregate(urs); got != aws.ToString(s.ShardId) {
				t.Fatalf("aggregate for %s landed on %s", aws.ToString(s.ShardId), got)
			}
		}
	}

	run := startReceiver(t, cfg, len(want))
	run.wait(t)
	run.stop(t)

	got := run.c.records()
	checkExactlyOnce(t, want, got)
	for _, r := range got {
		for _, s := range children {
			if aws.ToString(s.ShardId) == r.ShardID && !inShard(s, kinesistest.HashKey(r.PartitionKey)) {
				t.Errorf("user record %q delivered from %s, outside its hash key range", r.Data, r.ShardID)
			}
		}
	}
	if st := run.r.Stats(); st.OutOfRangeRecords != int64(len(again)) {
		t.Errorf("Stats.OutOfRangeRecords = %d, want %d", st.OutOfRangeRecords, len(again))
	}
	checkShardOrder(t, got)
	blocks := run.c.snapshot()
	checkRanges(t, stream, blocks)
	checkRecompute(t, run.r, blocks)
	// A receiver that never listed the shards (a restarted worker) lists
	// them to recompute, and filters the same.
	fresh, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkRecompute(t, fresh, blocks)
}
