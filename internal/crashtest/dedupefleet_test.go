//go:build unix

package crashtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/origin"
	kinesissink "github.com/weirstream/weir/sink/kinesis"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// envDedupe, set in a child, is the table of a reader's lists: the child's
// pipeline then reads its stream (one the Kinesis sink wrote with origin
// tags) with leases through kinesissink.Deduplicate, without a recovery log
// (the filters are state per shard, which replaces it), and outputs
// what Deduplicate keeps twice (see addDedupe).
const envDedupe = "WEIR_CRASHTEST_DEDUPE"

// Defaults of TestFleetDeduplicateTorture, sized for CI as
// TestFleetKinesisSinkTorture's are.
const (
	// fleetDedupeKills is the default of WEIR_TORTURE_KILLS for it.
	fleetDedupeKills = 2
	// fleetDedupePauses is the default of WEIR_FLEET_PAUSES for it.
	fleetDedupePauses = 1
	// fleetDedupeTail is how many records the producer puts once the
	// events are over, before it stops: every target key gets some (see
	// addDedupe), with 28 keys.
	fleetDedupeTail = 300
)

// addDedupe makes the child's pipeline a reader of envDedupe: its records
// through kinesissink.Deduplicate, then two outputs.
//
//   - The crash file (batchFile), each record kept with its partition key
//     for its shard (keyLabel): a key's records come in source order, a
//     target shard's do not (its keys interleave). A fleet's outputs are
//     at least once.
//   - The lists: a MapWithState keyed by partition key, declared
//     PartitionedBy the key itself (the sink's partition key), so that its
//     state too is kept per shard and moves with the lease, keeps each
//     key's list of IDs kept, in order; after every batch, each key's list
//     is written to the table as an item (id = the key, ids, n = their
//     number), conditional on n being greater than the item's. A batch
//     processed again by a shard's next owner writes the same lists, which
//     change nothing; the table holds, per key, the longest list any worker
//     had. With state per shard exact, the list of the lineage that goes
//     on is the longest once records of every key arrive after the last
//     kill or pause (fleetDedupeTail), so the table is the exactly-once
//     output: every ID once, in source order, or the test fails.
func addDedupe(recs *stream.Stream[kinesis.Record], cfg pipelineConfig) error {
	kept := kinesissink.Deduplicate(recs)
	byKey := stream.Map(kept, func(r kinesis.Record) kinesis.Record {
		r.ShardID = keyLabel(r.PartitionKey)
		return r
	})
	stream.ForEachBatch(byKey, cfg.out.Write, stream.Named("crashfile"))

	ids := stream.PartitionedBy(stream.Map(kept, func(r kinesis.Record) stream.Pair[string, int64] {
		id, err := strconv.ParseInt(string(r.Data), 10, 64)
		if err != nil {
			id = -1 // not an ID: kept with a tag, or damaged; the check shows it
		}
		return stream.Pair[string, int64]{Key: r.PartitionKey, Value: id}
	}), func(key string) string { return key })
	lists, _ := stream.MapWithState(ids, func(key string, id int64, st *stream.State[[]int64]) (stream.Pair[string, []int64], bool) {
		l := append(st.Get(), id) // the lists given out before keep their length: nothing they hold is written over
		st.Update(l)
		return stream.Pair[string, []int64]{Key: key, Value: l}, true
	})
	client := awsdynamodb.NewFromConfig(cfg.aws, func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(cfg.dynamoEndpoint) })
	stream.ForEachBatch(lists, func(ctx context.Context, b *batch.Batch[stream.Pair[string, []int64]]) error {
		return writeLists(ctx, client, cfg.dedupe, b)
	}, stream.Named("dedupe-lists"))
	return nil
}

// keyLabel returns a label of the target key (see targetKey) of a reader's
// crash file, in the form of a shard ID, which the file's record lines
// hold: "shardId-" and 12 digits, the source shard's number times 10 plus
// the key's number (stateKey); the key itself if it is not a target key.
func keyLabel(key string) string {
	shard, k, _ := strings.Cut(key, "/")
	n, err1 := strconv.ParseInt(strings.TrimPrefix(shard, "shardId-"), 10, 64)
	m, err2 := strconv.ParseInt(strings.TrimPrefix(k, "k"), 10, 64)
	if err1 != nil || err2 != nil || m >= 10 {
		return key
	}
	return fmt.Sprintf("shardId-%012d", n*10+m)
}

// writeLists writes each key's last list in b to table (see addDedupe),
// unless the table's is as long or longer.
func writeLists(ctx context.Context, client *awsdynamodb.Client, table string, b *batch.Batch[stream.Pair[string, []int64]]) error {
	last := map[string][]int64{}
	var keys []string
	for kv := range b.All() {
		if _, ok := last[kv.Key]; !ok {
			keys = append(keys, kv.Key)
		}
		last[kv.Key] = kv.Value
	}
	for _, k := range keys {
		l := last[k]
		ids := make([]string, len(l))
		for i, id := range l {
			ids[i] = strconv.FormatInt(id, 10)
		}
		_, err := client.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
			TableName:                aws.String(table),
			Key:                      map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: k}},
			UpdateExpression:         aws.String("SET #ids = :ids, #n = :n"),
			ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :n"),
			ExpressionAttributeNames: map[string]string{"#ids": "ids", "#n": "n"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":ids": &ddbtypes.AttributeValueMemberS{Value: strings.Join(ids, ",")},
				":n":   &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(len(l))},
			},
		})
		var shorter *ddbtypes.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &shorter) {
			return fmt.Errorf("crashtest: write the list of key %s: %w", k, err)
		}
	}
	return nil
}

// readLists returns the lists of the table written by writeLists, by key.
func readLists(t *testing.T, client *awsdynamodb.Client, table string) map[string][]int64 {
	t.Helper()
	got := map[string][]int64{}
	for _, item := range scanTable(t, client, table) {
		k, _ := item["id"].(*ddbtypes.AttributeValueMemberS)
		l, _ := item["ids"].(*ddbtypes.AttributeValueMemberS)
		if k == nil || l == nil {
			t.Fatalf("item %v: want a string id and ids", item)
		}
		for f := range strings.SplitSeq(l.Value, ",") {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("key %s: list %q: %v", k.Value, l.Value, err)
			}
			got[k.Value] = append(got[k.Value], id)
		}
	}
	return got
}

// TestFleetDeduplicateTorture is the fleet torture test of the reading
// side of origin tags (DESIGN.md, "Reading exactly once"): a writer (the
// crash test's child pipeline, one worker) copies a 4-shard source stream
// to a 3-shard target stream with sink/kinesis and stream.Origins(), some
// records failing on purpose, and the records of one call in copyOneIn put
// again up to two lease durations later (envKinesisSinkCopies), while a
// producer puts records. 3 reader workers (processes with their own worker
// IDs and output files, no recovery log) share the target stream through a
// lease table and read it through kinesissink.Deduplicate, whose filters
// are state per shard (see addDedupe). WEIR_TORTURE_KILLS times (default
// 2) a reader holding leases is killed with SIGKILL and restarted once the
// others hold every lease it held; WEIR_FLEET_PAUSES times (default 1) one
// is stopped with SIGSTOP until the others hold its leases, then let go on
// with SIGCONT; midway a shard of the target stream is split, so that
// copies of records its parent holds land in its children, and before
// the last event its children are merged again, so that copies of their
// records land in a child of two parents, whose filter is both parents'
// merged (origin.Filter.MergeFrom). The events'
// order and moments are drawn from WEIR_TORTURE_SEED, every other one
// inside a batch's later outputs. Then the producer puts
// fleetDedupeTail records more and stops, the writer drains and exits,
// the readers read the target to its end, and every reader gets SIGTERM
// and must drain and exit 0.
//
// The check is the documented promise: the readers' lists (the
// exactly-once output) hold every record of the source stream exactly
// once, each partition key's in source order; their output files hold
// every record at least once, each key's in order in a batch; no
// checkpoint is written by a reader that lost its lease. The copies in the
// target are counted, and those in another shard than their first copy
// (across the split or the merge).
func TestFleetDeduplicateTorture(t *testing.T) {
	kills, seed, rng := tortureScheduleOf(t, fleetDedupeKills)
	pauses := envInt(t, "WEIR_FLEET_PAUSES", fleetDedupePauses)
	start := time.Now()
	env := servers.Env(t)
	w := newHarness(t, env, fleetShards) // 28 target keys (targetKey): each shard of the target, and of its split, has some
	w.tuning.worker = "dedupe-writer"
	target := w.stream + "-out"
	w.kinesisSink, w.kinesisSinkOrigins, w.kinesisSinkCopies = target, true, true
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := env.CreateStream(ctx, target, fleetSinkTargetShards); err != nil {
		t.Fatal(err)
	}
	// The readers' harness: the target stream, its own lease table.
	r := *w
	r.stream, r.table, r.dedupe = target, target, createSinkTable(t, env)
	r.kinesisSink, r.kinesisSinkOrigins, r.kinesisSinkCopies = "", false, false
	fl := newSinkFleet(&r, "dedupe-r")
	fl.merge = true
	prod, stopProducer := startProducer(t, w)
	defer stopProducer()
	wc := w.start()
	for _, m := range fl.members {
		fl.cs = append(fl.cs, m.start())
	}

	inSink := fl.torture(kills, pauses, rng)
	w.awaitPuts(prod, fleetDedupeTail)
	stopProducer()
	put, maybe, _ := prod.snapshot()
	awaitFleet(t, "every source shard checkpointed at its end", waitLimit, []*child{wc}, func() string { return "\n--- writer:\n" + wc.tail() }, func() (bool, string) {
		return streamDrained(t, env, w.stream, w.table)
	})
	wc.term() // no copy lands after it
	awaitFleet(t, "every target shard checkpointed at its end", waitLimit, fl.cs, fl.tails, func() (bool, string) {
		return streamDrained(t, env, target, r.table)
	})
	termAll(t, fl.cs...)

	wf := w.check(put, maybe)
	f := checkAtLeastOnceIn(t, put, maybe, fl.members...)
	for _, m := range fl.members {
		m.checkJournalOf(false) // a worker may lose its leases before its first checkpoint
	}
	// want is every record of the source stream, per target key, in
	// source order.
	want := map[string][]int64{}
	source := 0
	for shard, recs := range readStream(t, env.Kinesis(), w.stream) {
		for _, rec := range recs {
			id, err := strconv.ParseInt(string(rec.Data), 10, 64)
			if err != nil {
				t.Fatalf("source record %q: %v", rec.Data, err)
			}
			want[targetKey(shard, id)] = append(want[targetKey(shard, id)], id)
			source++
		}
	}
	raw, moved := countCopies(t, readStream(t, env.Kinesis(), target))
	got := readLists(t, env.DynamoDB(), r.dedupe)
	kept := 0
	for _, ids := range got {
		kept += len(ids)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the readers' lists, records per partition key in stream order (-want source order +got):\n%s", diff)
		reportOnce(t, want, got)
	}
	if raw == source {
		t.Errorf("the target stream holds no copies (%d records, as many as the source): the test does not test Deduplicate", raw)
	}
	report(t, fmt.Sprintf("fleet Deduplicate torture: %d readers, %d kills, %d pauses (%d inside a batch's later outputs), a split of the target and a merge of its children, seed %d: readers %v; writer %v; source %d records, target %d (%d copies, %d in another shard than their first), %d in the lists; took %v",
		fleetWorkers, kills, pauses, inSink, seed, f, wf, source, raw, raw-source, moved, kept, time.Since(start).Round(time.Millisecond)))
}

// countCopies returns the number of records of shards (a stream written
// with version 2 origin tags, by shard) and that of the shards beyond the
// first that hold a copy of a record: a copy written to a child (of a
// split or a merge) of a record its parent holds.
func countCopies(t *testing.T, shards map[string][]types.Record) (raw, moved int) {
	t.Helper()
	in := map[string]map[string]bool{} // record data -> the shards holding it
	for shard, recs := range shards {
		for _, rec := range recs {
			raw++
			if tag, _, ok, err := origin.Decode(rec.Data); err != nil || !ok || tag.Seq == "" {
				t.Fatalf("target shard %s, record %s: want a version 2 origin tag, got %+v (tagged %v, %v)", shard, aws.ToString(rec.SequenceNumber), tag, ok, err)
			}
			d := string(rec.Data)
			if in[d] == nil {
				in[d] = map[string]bool{}
			}
			in[d][shard] = true
		}
	}
	for _, s := range in {
		moved += len(s) - 1
	}
	return raw, moved
}
