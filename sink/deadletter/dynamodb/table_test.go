package dynamodb_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/letters/letterstest"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/sink/deadletter/dynamodb"
	sinkddb "github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/stream"
)

var servers = localaws.NewShared(localaws.Options{DynamoDB: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// newTable creates a dead-letter table (key "batch", "index") and returns
// a Table of it and the client.
func newTable(t *testing.T) (*dynamodb.Table, *ddb.Client, string) {
	t.Helper()
	c := servers.Env(t).DynamoDB()
	name := letterstest.CreateTable(t, c)
	tab, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	return tab, c, name
}

// TestPipelineOneInN quarantines the records a Map panics on, one in 1000
// of 10,000, into a table: each is an item, with its panic, stack and
// source range, and the pipeline goes on.
func TestPipelineOneInN(t *testing.T) {
	tab, _, _ := newTable(t)
	bad := letterstest.RunOneInN(t, tab, 10000, 1000)
	ls, err := tab.Letters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	letterstest.Check(t, ls, bad)
}

// letter returns a letter of batch 1700000000000, output 1.
func letter(i int, rec string) stream.DeadLetter {
	return stream.DeadLetter{
		Time: 1700000000000, Output: 1, OutputName: `ForEach("out") of Map (stream 1)`, Index: i,
		Range:  batch.SeqRange{Stream: "in", Shard: "shardId-000000000001", First: "100", Last: "200", Count: 5},
		Offset: i, Record: []byte(rec), Encoding: "raw", Err: "panic: no", Panic: "no", Stack: "goroutine 7 [running]:\nmain.f()",
	}
}

// TestRecomputedBatchSameItems quarantines a batch's letters, then again
// as a batch recomputed after a crash does (with other stacks): the table
// holds the same items, one per letter, as the first call wrote them.
func TestRecomputedBatchSameItems(t *testing.T) {
	first := []stream.DeadLetter{letter(0, "a"), letter(1, "b"), letter(2, "")}
	again := []stream.DeadLetter{letter(0, "a"), letter(1, "b"), letter(2, "")}
	for i := range again {
		again[i].Stack = "goroutine 99 [running]:"
	}
	if diff := cmp.Diff(first, quarantineTwice(t, first, again), cmp.Comparer(bytes.Equal)); diff != "" {
		t.Errorf("letters after a recomputed batch (-want +got):\n%s", diff)
	}
}

// quarantineTwice quarantines first into a new table, then again, as a
// batch recomputed after a crash does, and returns the table's letters.
func quarantineTwice(t *testing.T, first, again []stream.DeadLetter) []stream.DeadLetter {
	t.Helper()
	tab, _, _ := newTable(t)
	for _, ls := range [][]stream.DeadLetter{first, again} {
		if err := tab.Quarantine(t.Context(), ls); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tab.Letters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestLettersOfOneSourceRecord quarantines letters of equal Range and
// Offset and other records, as a ForEachBatch with Origins quarantines
// the records a FlatMap made of one source record, and one of another
// record: the table holds each, also once the batch is quarantined again
// (recomputed). Keyed by their source record alone, the first was
// replaced by the second, and lost.
func TestLettersOfOneSourceRecord(t *testing.T) {
	one := batch.SeqRange{Stream: "in", Shard: "shardId-000000000001", First: "150", Last: "150", Count: 1}
	ls := []stream.DeadLetter{letter(0, "a"), letter(1, "b"), letter(2, "c")}
	ls[0].Range, ls[0].Offset = one, 0
	ls[1].Range, ls[1].Offset = one, 0
	if diff := cmp.Diff(ls, quarantineTwice(t, ls, ls), cmp.Comparer(bytes.Equal)); diff != "" {
		t.Errorf("letters of one source record (-want +got):\n%s", diff)
	}
}

// TestOversizedLetter quarantines a letter with a 1 MiB record and a 300
// KiB stack: it is written cut to fit an item, its stack and record
// ending with markers and its encoding "truncated:raw", and the next
// letter whole.
func TestOversizedLetter(t *testing.T) {
	tab, _, _ := newTable(t)
	big := letter(0, strings.Repeat("r", 1<<20))
	big.Stack = strings.Repeat("s", 300<<10)
	small := letter(1, "small")
	if err := tab.Quarantine(t.Context(), []stream.DeadLetter{big, small}); err != nil {
		t.Fatalf("Quarantine of an oversized letter: %v", err)
	}
	got, err := tab.Letters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d letters, want 2", len(got))
	}
	l := got[0]
	if l.Encoding != "truncated:raw" || !bytes.HasSuffix(l.Record, []byte(" bytes kept]")) || !bytes.HasPrefix(l.Record, []byte("rrrr")) || len(l.Record) < 250<<10 {
		t.Errorf("big letter: encoding %q, record of %d bytes ending %q: want it cut with a marker", l.Encoding, len(l.Record), l.Record[max(0, len(l.Record)-60):])
	}
	if !strings.HasSuffix(l.Stack, " bytes kept]") || len(l.Stack) > 100 {
		t.Errorf("big letter: stack of %d bytes ending %q: want it cut first", len(l.Stack), l.Stack[max(0, len(l.Stack)-60):])
	}
	if l.Range != big.Range || l.Offset != big.Offset || l.Err != big.Err {
		t.Errorf("big letter: range %+v offset %d err %q: want the source's kept", l.Range, l.Offset, l.Err)
	}
	if diff := cmp.Diff(small, got[1], cmp.Comparer(bytes.Equal)); diff != "" {
		t.Errorf("small letter (-want +got):\n%s", diff)
	}
}

// TestNewRefusesOtherKey checks that New refuses a table without the
// dead-letter key, naming the key to create.
func TestNewRefusesOtherKey(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	name := localaws.UniqueName(t)
	_, err := c.CreateTable(t.Context(), &ddb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name})
	if err == nil || !strings.Contains(err.Error(), `"batch" (string) and the sort key "index" (number)`) {
		t.Errorf("New on a table keyed by id = %v, want an error naming the key", err)
	}
	_, err = dynamodb.New(t.Context(), sinkddb.Config{Client: c})
	if !errors.Is(err, sinkddb.ErrInvalidConfig) {
		t.Errorf("New without Table = %v, want ErrInvalidConfig", err)
	}
}

// TestNewDescribesOnce checks, against dynalite behind a fault transport
// (no SDK retries), that New reads the table's description once, through
// the sink's DescribeTable, which is bounded by a timeout and retried: a
// second DescribeTable of its own, with neither, failed New on a server
// error the sink's had ridden out (and hung it on a silent DynamoDB).
func TestNewDescribesOnce(t *testing.T) {
	tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "DescribeTable", Kind: faults.InternalFailure, Skip: 1, Times: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	env := servers.Env(t)
	name := letterstest.CreateTable(t, env.DynamoDB())
	c := env.DynamoDB(func(o *ddb.Options) { o.HTTPClient = tr; o.Retryer = aws.NopRetryer{} })
	if _, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name}); err != nil {
		t.Fatalf("New with a DescribeTable failing after the sink's: %v", err)
	}
	if n := tr.Requests("DescribeTable"); n != 1 {
		t.Errorf("%d DescribeTable calls, want 1", n)
	}
}

// TestNewMissingTableNamesEndpoint checks that New on a table that does
// not exist fails naming the endpoint the client sends to, as the sink's
// New does: the client New hands the sink still shows its options.
func TestNewMissingTableNamesEndpoint(t *testing.T) {
	env := servers.Env(t)
	_, err := dynamodb.New(t.Context(), sinkddb.Config{Client: env.DynamoDB(), Table: localaws.UniqueName(t)})
	if err == nil || !strings.Contains(err.Error(), env.DynamoDBEndpoint) {
		t.Errorf("New on a missing table: %v, want an error naming the endpoint %s", err, env.DynamoDBEndpoint)
	}
}

// TestNewRefusesLetterAttributeAsVersion checks that New refuses a
// VersionAttribute that names an attribute of a letter's item, or the
// replay state weir deadletters keeps on it: it was accepted, and the
// first Quarantine of a letter with that attribute failed its batch (the
// sink refuses an item holding its version attribute), or replay
// overwrote the version.
func TestNewRefusesLetterAttributeAsVersion(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	name := letterstest.CreateTable(t, c)
	for _, attr := range []string{"time", "err", "stack", "batchIndex", "replay"} {
		_, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name, VersionAttribute: attr})
		if !errors.Is(err, sinkddb.ErrInvalidConfig) || !strings.Contains(err.Error(), "VersionAttribute") {
			t.Errorf("New with VersionAttribute %q = %v, want ErrInvalidConfig naming VersionAttribute", attr, err)
		}
	}
	if _, err := dynamodb.New(t.Context(), sinkddb.Config{Client: c, Table: name, VersionAttribute: "letterVersion"}); err != nil {
		t.Errorf("New with VersionAttribute letterVersion: %v", err)
	}
}
