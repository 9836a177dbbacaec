//go:build unix

package crashtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// envSink, set in a child, is the table of the DynamoDB sink: the child
// then adds two sink outputs, one putting an item "r<id>" {n: id} per
// record, one adding 1 to the hits of the item of the record's key
// (stateKey). The counting sink's client marks its first write in each
// child with the file <out>.sink.wrote.<pid> and holds that write's answer
// for markWindow, so that the parent can kill the child inside a batch
// whose writes are partly applied.
const envSink = "WEIR_CRASHTEST_SINK"

// sinkMarks is the mark prefix of a child whose output file is out.
func sinkMarks(out string) string { return out + ".sink" }

// addSink adds the sink outputs of envSink to the child's pipeline.
func addSink(recs *stream.Stream[kinesis.Record], cfg pipelineConfig) error {
	ctx := context.Background() // bounds only New's DescribeTable
	awsCfg := cfg.aws
	id := func(r kinesis.Record) int64 { n, _ := strconv.ParseInt(string(r.Data), 10, 64); return n }
	str := func(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
	num := func(n int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
	}
	// One worker restarted with its log, reading with leases: versions by
	// batch time are exact for it (the counts' items take records of
	// every shard, which versions of origin would write at least once).
	puts, err := dynamodb.New(ctx, dynamodb.Config{AWS: &awsCfg, Endpoint: cfg.dynamoEndpoint, Table: cfg.sink, Logger: cfg.logger, AllowBatchTimeVersions: true},
		func(r kinesis.Record) (dynamodb.Write, error) {
			return dynamodb.Write{Item: map[string]types.AttributeValue{"id": str(fmt.Sprint("r", id(r))), "n": num(id(r))}}, nil
		})
	if err != nil {
		return err
	}
	client := awsdynamodb.NewFromConfig(awsCfg, func(o *awsdynamodb.Options) { o.BaseEndpoint = aws.String(cfg.dynamoEndpoint) })
	slowIDs, err := readSlowSinkIDs(cfg.sinkMarks)
	if err != nil {
		return err
	}
	var slowed atomic.Bool
	counts, err := dynamodb.New(ctx, dynamodb.Config{Client: &markClient{Client: client, mark: cfg.sinkMarks + ".wrote." + strconv.Itoa(os.Getpid())},
		Table: cfg.sink, Logger: cfg.logger, AllowBatchTimeVersions: true},
		func(r kinesis.Record) (dynamodb.Write, error) {
			if slowIDs[id(r)] && !slowed.Swap(true) {
				time.Sleep(slowSinkDelay)
			}
			return dynamodb.Write{
				Key: map[string]types.AttributeValue{"id": str(stateKey(id(r)))}, Update: "ADD hits :one",
				Values: map[string]types.AttributeValue{":one": num(1)},
			}, nil
		})
	if err != nil {
		return err
	}
	stream.ForEachBatch(recs, puts.Write, stream.Named("sink-puts"))
	stream.ForEachBatch(recs, counts.Write, stream.Named("sink-counts"))
	return nil
}

// slowSinkDelay is how long the counting sink holds the batch of a slow
// record (see slowSinkIDs): past the lease duration, the longest a
// receiver's graceful stop waits for its stored records' completion.
const slowSinkDelay = leaseDuration + 2*time.Second

// slowSinkIDs is the file, beside the sink's marks, of the IDs of records
// whose batch the counting sink holds for slowSinkDelay, once per child,
// before its writes: after the batch's record lines, before its
// completion. The harness writes the shards' last records there for the
// last child (harness.slowLast).
func slowSinkIDs(marks string) string { return marks + ".slow" }

// writeSlowSinkIDs writes ids to the slowSinkIDs file of the output out.
func writeSlowSinkIDs(t *testing.T, out string, ids map[string]int64) {
	t.Helper()
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(strconv.FormatInt(id, 10) + "\n")
	}
	if err := os.WriteFile(slowSinkIDs(sinkMarks(out)), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// awaitPuts polls prod until it put n more records, failing the test
// after waitLimit.
func (h *harness) awaitPuts(prod *producer, n int) {
	h.t.Helper()
	put, _, _ := prod.snapshot()
	want := len(put) + n
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if put, _, _ := prod.snapshot(); len(put) >= want {
			return
		}
		select {
		case <-deadline.C:
			h.t.Fatalf("the producer did not put %d more records within %v", n, waitLimit)
		case <-tick.C:
		}
	}
}

// readSlowSinkIDs reads the slowSinkIDs file of marks; none if it does not
// exist.
func readSlowSinkIDs(marks string) (map[int64]bool, error) {
	data, err := os.ReadFile(slowSinkIDs(marks))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids := map[int64]bool{}
	for f := range strings.FieldsSeq(string(data)) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", slowSinkIDs(marks), err)
		}
		ids[n] = true
	}
	return ids, nil
}

// markClient marks its first applied update (see envSink).
type markClient struct {
	*awsdynamodb.Client
	mark   string
	marked atomic.Bool
}

func (c *markClient) UpdateItem(ctx context.Context, in *awsdynamodb.UpdateItemInput, o ...func(*awsdynamodb.Options)) (*awsdynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, o...)
	if err == nil {
		if werr := markFirst(&c.marked, c.mark); werr != nil {
			return nil, werr
		}
	}
	return out, err
}

// markFirst, the first time it is called with marked, creates the mark
// file at path and holds its caller for markWindow: the window a sink
// test's parent kills the child in (see envSink).
func markFirst(marked *atomic.Bool, path string) error {
	if marked.Swap(true) {
		return nil
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return err
	}
	time.Sleep(markWindow)
	return nil
}

// sinkTorture runs h.torture with the kills of the sinks' torture tests:
// in turn right after the child marked its first write with the mark what
// (see awaitMark; inside a batch partly written, which the restart runs
// again) and at a random moment. It returns the figures and the number of
// kills of each kind.
func (h *harness) sinkTorture(kills int, rng *rand.Rand, what string) (f figures, inSink, random int) {
	f = h.torture(kills, func(i int, c *child) {
		if i%2 == 0 {
			h.awaitMark(c, sinkMarks(h.out), what, "")
			c.kill(0)
			inSink++
			return
		}
		c.kill(minKillDelay + time.Duration(rng.Int64N(int64(maxKillDelay-minKillDelay))))
		random++
	})
	return f, inSink, random
}

// TestCrashTortureDynamoSink is the torture test of the DynamoDB sink
// (DESIGN.md, "Exactly-once outputs"): the child writes every record to a
// table twice over, a put of one item per record and an ADD to a count per
// key, and is killed in turn right after its first write landed (inside a
// batch partly written, which the restart runs again) and at a random
// moment, and restarted each time with its recovery log. After the last
// child drained, the table must hold exactly what one uninterrupted run
// writes: one item per record delivered, and each key's count equal to its
// number of records, every item counted. The output file is checked as in
// TestCrashTorture.
func TestCrashTortureDynamoSink(t *testing.T) {
	kills, seed, rng := tortureSchedule(t)
	start := time.Now()
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true, DataDir: t.TempDir()})
	h := newHarness(t, env, 2)
	h.sink = createSinkTable(t, env)
	client := env.DynamoDB()
	f, inSink, random := h.sinkTorture(kills, rng, "wrote")

	seen := map[int64]bool{}
	if _, err := scanRecords(h.out, 0, seen); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for id := range seen {
		want[fmt.Sprint("r", id)] = fmt.Sprint("n=", id)
	}
	hits := map[string]int64{}
	for id := range seen {
		hits[stateKey(id)]++
	}
	for k, n := range hits {
		want[k] = fmt.Sprint("hits=", n)
	}
	got := map[string]string{}
	in := &awsdynamodb.ScanInput{TableName: aws.String(h.sink), ConsistentRead: aws.Bool(true)}
	for {
		out, err := client.Scan(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			id := it["id"].(*types.AttributeValueMemberS).Value
			for a, v := range it {
				if a != "id" && a != dynamodb.DefaultVersionAttribute {
					got[id] = a + "=" + v.(*types.AttributeValueMemberN).Value
				}
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sink table (-want +got):\n%s", diff)
	}
	report(t, fmt.Sprintf("DynamoDB sink torture: %d kills (%d inside the sink's writes, %d random), seed %d: %v; %d items; took %v",
		kills, inSink, random, seed, f, len(got), time.Since(start).Round(time.Millisecond)))
}

// TestCrashDrainSlowLastBatch is the regression test of the torture tests'
// last stop: the SIGTERM waits for the completion of the batch holding the
// shards' last records, not only for its record lines. Here that batch's
// sink writes take longer than the lease duration, which bounds how long
// the receiver's graceful stop waits for completions before its final
// checkpoints; a SIGTERM right after the record lines left the checkpoints
// short of the last records (the torture tests' rare failure on a slow
// machine).
func TestCrashDrainSlowLastBatch(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true, DataDir: t.TempDir()})
	h := newHarness(t, env, 2)
	h.sink, h.slowLast = createSinkTable(t, env), true
	// The kill lands inside a batch, which the child did not complete:
	// the records it holds and those put after it are left to the last
	// child, whose batch holding the last records is then the slow one.
	h.torture(1, func(_ int, c *child) {
		h.awaitInOutput(c)
		c.kill(0)
	})
}

// createSinkTable creates the DynamoDB sink's table (see envSink) and
// returns its name.
func createSinkTable(t *testing.T, env *localaws.Env) string {
	t.Helper()
	name := localaws.UniqueName(t)
	if _, err := env.DynamoDB().CreateTable(t.Context(), &awsdynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// scanTable returns every item of table, read consistently.
func scanTable(t *testing.T, client *awsdynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	p := awsdynamodb.NewScanPaginator(client, &awsdynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("scan table %s: %v", table, err)
		}
		items = append(items, page.Items...)
	}
	return items
}
