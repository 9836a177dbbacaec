package dynamolog_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/recovery/dynamolog"
	"github.com/weirstream/weir/recovery/recoverytest"
)

const table = "weir-recovery"

var (
	block      = logtest.Block
	mustAppend = logtest.MustAppend
)

// TestDynamo runs every DynamoDB log test against one dynalite.
func TestDynamo(t *testing.T) {
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	client := env.DynamoDB()
	cfg := func(t *testing.T) dynamolog.Config {
		return dynamolog.Config{Client: client, Table: table, Name: localaws.UniqueName(t)}
	}
	t.Run("Conformance", func(t *testing.T) {
		recoverytest.Run(t, func(t *testing.T) recovery.Opener { return cfg(t) })
	})
	t.Run("Fencing", func(t *testing.T) { testDynamoFencing(t, cfg(t)) })
	t.Run("RetriedPut", func(t *testing.T) { testDynamoRetriedPut(t, cfg(t)) })
	t.Run("LostResponse", func(t *testing.T) { testDynamoLostResponse(t, cfg(t)) })
	t.Run("CompactInterrupted", func(t *testing.T) { testDynamoCompactInterrupted(t, cfg(t)) })
	t.Run("LargeEntries", func(t *testing.T) { testDynamoLargeEntries(t, cfg(t)) })
	t.Run("ManyShards", func(t *testing.T) { testDynamoManyShards(t, cfg) })
	t.Run("CorruptItem", func(t *testing.T) { testDynamoCorruptItem(t, cfg(t)) })
	t.Run("ClaimRaced", func(t *testing.T) { testDynamoClaimRaced(t, cfg(t)) })
	t.Run("Table", func(t *testing.T) { testDynamoTable(t, client) })
	t.Run("Endpoint", func(t *testing.T) {
		// No client: Open builds one from the AWS configuration and the
		// endpoint, as the lease table's configuration does.
		awsCfg := env.AWSConfig()
		cfg := dynamolog.Config{AWS: &awsCfg, Endpoint: env.DynamoDBEndpoint, Table: table, Name: localaws.UniqueName(t)}
		l := openDynamo(t, cfg)
		mustAppend(t, l, block(0, 0))
		logtest.Check(t, openDynamo(t, cfg), []recoverylog.Entry{block(0, 0)})
	})
	t.Run("InvalidConfig", func(t *testing.T) {
		// AttemptTimeout 5: seconds meant, nanoseconds written; no attempt
		// could finish, and Open retried for ever.
		_, err := dynamolog.Config{Name: strings.Repeat("n", 1025), Endpoint: "127.0.0.1:1", Client: client, AttemptTimeout: 5}.Open(t.Context())
		if !errors.Is(err, recovery.ErrInvalidConfig) {
			t.Fatalf("Open: got %v, want ErrInvalidConfig", err)
		}
		for _, want := range []string{`Endpoint "127.0.0.1:1"`, "Table empty", "at most 1024 bytes", "Client is set with Endpoint",
			"AttemptTimeout 5ns: must be at least 1ms", "n * time.Second"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open error %q does not contain %q", err, want)
			}
		}
	})
	t.Run("InvalidTableName", func(t *testing.T) {
		// DynamoDB's rule, checked before any call: 3 to 255 of
		// a-z A-Z 0-9 _ . - (dynalite would refuse these with a
		// ValidationException).
		for _, name := range []string{"ab", "recovery logs", strings.Repeat("t", 256)} {
			_, err := dynamolog.Config{Client: client, Table: name, Name: localaws.UniqueName(t)}.Open(t.Context())
			if !errors.Is(err, recovery.ErrInvalidConfig) || !strings.Contains(err.Error(), "Table: table name") {
				t.Errorf("Open with Table %.20q...: %v, want ErrInvalidConfig naming the Table's rule", name, err)
			}
		}
	})
}

// openDynamo opens a DynamoDB log through the driver's view.
func openDynamo(t *testing.T, cfg dynamolog.Config) *recoverylog.Log {
	t.Helper()
	l, err := recoverylog.Open(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// testDynamoFencing opens the log a second time, as a new owner would, and
// checks the first writer can no longer append.
func testDynamoFencing(t *testing.T, cfg dynamolog.Config) {
	a := openDynamo(t, cfg)
	mustAppend(t, a, block(0, 0))
	b := openDynamo(t, cfg)
	logtest.Check(t, b, []recoverylog.Entry{block(0, 0)})
	if err := a.Append(t.Context(), block(0, 1)); !errors.Is(err, recovery.ErrFenced) {
		t.Fatalf("Append by the first writer: got %v, want ErrFenced", err)
	} else if !strings.Contains(err.Error(), "fix:") || !strings.Contains(err.Error(), "Name") {
		// Two workers given one Name fence each other in turn at every
		// restart: the error says so.
		t.Errorf("Append by the first writer: %v, want an error naming the fix (a Name of each worker's own)", err)
	}
	if err := a.Compact(t.Context()); !errors.Is(err, recovery.ErrFenced) {
		t.Fatalf("Compact by the first writer: got %v, want ErrFenced", err)
	}
	mustAppend(t, b, block(0, 2))
	if err := b.Compact(t.Context()); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	c := openDynamo(t, cfg)
	st, err := recoverylog.Recover([]recoverylog.Entry{block(0, 0), block(0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	logtest.Check(t, c, st.Entries())
}

// faultyClient wraps a Client to inject faults into PutItem and
// BatchWriteItem.
type faultyClient struct {
	dynamolog.Client
	put     func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	batch   func(ctx context.Context, in *dynamodb.BatchWriteItemInput) (*dynamodb.BatchWriteItemOutput, error)
	queries atomic.Int32
}

func (c *faultyClient) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries.Add(1)
	return c.Client.Query(ctx, in, opts...)
}

func (c *faultyClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.put != nil {
		return c.put(ctx, in)
	}
	return c.Client.PutItem(ctx, in, opts...)
}

func (c *faultyClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if c.batch != nil {
		return c.batch(ctx, in)
	}
	return c.Client.BatchWriteItem(ctx, in, opts...)
}

func itemType(in *dynamodb.PutItemInput) string {
	if s, ok := in.Item["type"].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// testDynamoRetriedPut sends every entry put twice, as the SDK does when a
// response is lost, and checks the second put's conditional failure is
// recognised as the writer's own success.
func testDynamoRetriedPut(t *testing.T, cfg dynamolog.Config) {
	real := cfg.Client
	fc := &faultyClient{Client: real}
	fc.put = func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		if _, err := real.PutItem(ctx, in); err != nil || itemType(in) != "entry" {
			return nil, err
		}
		return real.PutItem(ctx, in)
	}
	cfg.Client = fc
	l := openDynamo(t, cfg)
	h := logtest.History()
	mustAppend(t, l, h...)
	logtest.Check(t, l, h)
	l.Close()
	logtest.Check(t, openDynamo(t, cfg), h)
}

// testDynamoLostResponse makes puts succeed but report an error, as a
// connection cut after the request was sent does: the append retries until
// an answer comes, finds its own item in place, and goes on. A put that
// never landed and whose seq another writer took meanwhile is fenced off;
// a put refused for good makes the log unusable.
func testDynamoLostResponse(t *testing.T, cfg dynamolog.Config) {
	real := cfg.Client
	lost := errors.New("connection reset")
	var fail, drop atomic.Int32 // puts to land but report lost; puts to lose
	var refuse atomic.Bool
	var onDrop func() // runs when a put is lost
	fc := &faultyClient{Client: real}
	fc.put = func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		if refuse.Load() {
			return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Fault: smithy.FaultClient}
		}
		if drop.Add(-1) >= 0 {
			if onDrop != nil {
				onDrop()
			}
			return nil, lost
		}
		out, err := real.PutItem(ctx, in)
		if err == nil && fail.Add(-1) >= 0 {
			return nil, lost
		}
		return out, err
	}
	faulty := cfg
	faulty.Client, faulty.Clock, faulty.AttemptTimeout = fc, &skipClock{}, -1
	l := openDynamo(t, faulty)
	mustAppend(t, l, block(0, 0))
	fail.Store(2)
	mustAppend(t, l, block(0, 1), block(0, 2))
	logtest.Check(t, l, []recoverylog.Entry{block(0, 0), block(0, 1), block(0, 2)})

	// The put is lost, and before it is tried again another writer opens
	// the log and takes its seq with its claim.
	drop.Store(1)
	onDrop = func() { openDynamo(t, cfg) }
	if err := l.Append(t.Context(), block(0, 3)); !errors.Is(err, recovery.ErrFenced) {
		t.Fatalf("Append whose seq another writer took during an outage: got %v, want ErrFenced", err)
	}

	onDrop = nil
	l = openDynamo(t, faulty)
	refuse.Store(true)
	if err := l.Append(t.Context(), block(0, 4)); err == nil || errors.Is(err, recovery.ErrFenced) {
		t.Fatalf("Append refused for good: got %v, want the refusal", err)
	}
	refuse.Store(false)
	if err := l.Append(t.Context(), block(0, 5)); err == nil {
		t.Fatal("Append after a refused append succeeded, want the first failure")
	}
	l.Close()
	logtest.Check(t, openDynamo(t, cfg), []recoverylog.Entry{block(0, 0), block(0, 1), block(0, 2)})
}

// testDynamoCompactInterrupted fails a compaction at each step that can
// fail, for a log without state and one with a snapshot and batches kept
// for replay after it, and checks the log recovers to the same state after
// a reopen.
func testDynamoCompactInterrupted(t *testing.T, cfg dynamolog.Config) {
	// A refusal, which the log does not retry: the compaction stops there,
	// as a crash would stop it.
	var boom error = &smithy.GenericAPIError{Code: "ValidationException", Message: "boom", Fault: smithy.FaultClient}
	type fault struct {
		name     string
		history  []recoverylog.Entry
		failPut  string // item type whose put fails
		failSkip int    // puts of that type to let through first
		failDel  bool
	}
	tests := []fault{
		{name: "after some copies", history: logtest.History(), failPut: "entry", failSkip: 2},
		{name: "before the base item", history: logtest.History(), failPut: "base"},
		{name: "deletes fail", history: logtest.History(), failDel: true},
		// The copies of a batch kept for replay (its block, allocation and
		// completion) follow the originals, in which the batch completed.
		{name: "state after a replayed block", history: logtest.StateHistory(""), failPut: "entry", failSkip: 3},
		{name: "state after a replayed batch", history: logtest.StateHistory(""), failPut: "entry", failSkip: 5},
		{name: "state before the base item", history: logtest.StateHistory(""), failPut: "base"},
		{name: "runs of empty batches before the base item", history: logtest.RunHistory(""), failPut: "base"},
	}
	// With runs of empty batches, the compaction cut short after each of
	// its copies.
	runs, err := recoverylog.Recover(logtest.RunHistory(""))
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(runs.Entries()) {
		tests = append(tests, fault{name: fmt.Sprintf("runs of empty batches after %d copies", n),
			history: logtest.RunHistory(""), failPut: "entry", failSkip: n})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.history
			want, err := recoverylog.Recover(h)
			if err != nil {
				t.Fatal(err)
			}
			cfg := cfg
			cfg.Name = localaws.UniqueName(t)
			l := openDynamo(t, cfg)
			mustAppend(t, l, h...)
			l.Close()

			real := cfg.Client
			var puts atomic.Int32
			fc := &faultyClient{Client: real}
			fc.put = func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				if itemType(in) == tt.failPut && int(puts.Add(1)) > tt.failSkip {
					return nil, boom
				}
				return real.PutItem(ctx, in)
			}
			if tt.failDel {
				fc.batch = func(context.Context, *dynamodb.BatchWriteItemInput) (*dynamodb.BatchWriteItemOutput, error) {
					return nil, boom
				}
			}
			faulty := cfg
			faulty.Client = fc
			l = openDynamo(t, faulty)
			err = l.Compact(t.Context())
			if tt.failDel != (err == nil) {
				t.Fatalf("Compact: %v", err)
			}
			l.Close()
			l = openDynamo(t, cfg)
			got, err := recoverylog.Load(t.Context(), l)
			if err != nil {
				t.Fatalf("Load after an interrupted Compact: %v", err)
			}
			if diff := cmp.Diff(want, got, logtest.EquateEmpty()); diff != "" {
				t.Fatalf("State mismatch (-want +got):\n%s", diff)
			}
			if err := l.Compact(t.Context()); err != nil {
				t.Fatalf("Compact: %v", err)
			}
			l.Close()
			logtest.Check(t, openDynamo(t, cfg), want.Entries())
			if n := countItems(t, cfg); n > len(want.Entries())+1+4 {
				t.Errorf("%d items left after a full compaction, want the %d entries, a base item and the claims",
					n, len(want.Entries()))
			}
		})
	}
}

func countItems(t *testing.T, cfg dynamolog.Config) int {
	t.Helper()
	out, err := cfg.Client.Query(t.Context(), &dynamodb.QueryInput{
		TableName:                 aws.String(cfg.Table),
		KeyConditionExpression:    aws.String("#l = :l"),
		ExpressionAttributeNames:  map[string]string{"#l": "log"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": &types.AttributeValueMemberS{Value: cfg.Name}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

// testDynamoLargeEntries appends entries near the item size limit, enough
// for reads to span several Query pages, and one over it.
func testDynamoLargeEntries(t *testing.T, cfg dynamolog.Config) {
	big := func(seq uint64, size int) recoverylog.Entry {
		r := batch.SeqRange{Stream: strings.Repeat("s", size), Shard: "x", First: "1", Last: "1", Count: 1}
		return recoverylog.BlockStored(batch.BlockInfo{ID: batch.BlockID{Seq: seq}, Ranges: []batch.SeqRange{r}, Count: 1})
	}
	l := openDynamo(t, cfg)
	var want []recoverylog.Entry
	for i := range uint64(4) {
		want = append(want, big(i, dynamolog.MaxEntrySize-200))
	}
	mustAppend(t, l, want...)
	err := l.Append(t.Context(), big(9, dynamolog.MaxEntrySize))
	if !errors.Is(err, recovery.ErrEntryTooLarge) {
		t.Fatalf("Append of a too large entry: got %v, want ErrEntryTooLarge", err)
	}
	l.Close()
	fc := &faultyClient{Client: cfg.Client}
	cfg.Client = fc
	logtest.Check(t, openDynamo(t, cfg), want)
	if n := fc.queries.Load(); n < 2 {
		t.Errorf("the log was read in %d Query pages, want several", n)
	}
}

func testDynamoCorruptItem(t *testing.T, cfg dynamolog.Config) {
	l := openDynamo(t, cfg)
	mustAppend(t, l, block(0, 0))
	l.Close()
	put := func(seq string, entry types.AttributeValue) {
		t.Helper()
		_, err := cfg.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
			TableName: aws.String(cfg.Table),
			Item: map[string]types.AttributeValue{
				"log":   &types.AttributeValueMemberS{Value: cfg.Name},
				"seq":   &types.AttributeValueMemberN{Value: seq},
				"type":  &types.AttributeValueMemberS{Value: "entry"},
				"entry": entry,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// An entry the driver cannot decode: the log opens, its Read fails.
	put("100", &types.AttributeValueMemberS{Value: `{"v":1,"kind":"complete"}`})
	l = openDynamo(t, cfg)
	_, err := l.Read(t.Context())
	var ce *recovery.CorruptError
	if !errors.As(err, &ce) || ce.Offset != 1 {
		t.Fatalf("Read: got %v, want a *CorruptError of record 1", err)
	}
	l.Close()
	// An item that is not an entry's: the log does not open.
	put("101", &types.AttributeValueMemberN{Value: "1"})
	_, err = cfg.Open(t.Context())
	if !errors.As(err, &ce) {
		t.Fatalf("Open: got %v, want a *CorruptError", err)
	}
	if want := "dynamodb:" + cfg.Table + "/" + cfg.Name; ce.Path != want || ce.Offset != 101 {
		t.Fatalf("CorruptError at %s offset %d, want %s offset 101", ce.Path, ce.Offset, want)
	}
}

// testDynamoTable checks a missing table is created, an existing one used,
// and one with another key refused.
func testDynamoTable(t *testing.T, client *dynamodb.Client) {
	name := localaws.UniqueName(t)
	cfg := dynamolog.Config{Client: client, Table: name, Name: "app"}
	l := openDynamo(t, cfg)
	mustAppend(t, l, block(0, 0))
	l.Close()
	logtest.Check(t, openDynamo(t, cfg), []recoverylog.Entry{block(0, 0)})

	other := name + "-other"
	_, err := client.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(other),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Table = other
	_, err = cfg.Open(t.Context())
	if !errors.Is(err, recovery.ErrInvalidConfig) || !strings.Contains(err.Error(), `has key ("leaseKey", "")`) {
		t.Fatalf("Open on a table with another key: got %v", err)
	}

	// The key's names, but a string sort key: every put would be refused.
	typed := name + "-typed"
	_, err = client.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName: aws.String(typed),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("log"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("seq"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("log"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("seq"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Table = typed
	_, err = cfg.Open(t.Context())
	if !errors.Is(err, recovery.ErrInvalidConfig) || !strings.Contains(err.Error(), `sort key "seq" of type S`) {
		t.Fatalf("Open on a table whose sort key is a string: got %v, want ErrInvalidConfig naming the key's type", err)
	}
}

// testDynamoManyShards logs blocks of 2,500 distinct shards with long names,
// whose progress alone is more than an item holds, as a stream resharded
// over months leaves, and checks Compact succeeds: with every shard
// finished, the log keeps nothing of them; with none finished, it keeps
// their progress in several summary items.
func testDynamoManyShards(t *testing.T, cfg func(t *testing.T) dynamolog.Config) {
	const shards, perBlock = 2500, 500
	name := strings.Repeat("s", 100)
	shard := func(i int) string { return "shardId-" + strconv.Itoa(1e11+i) }
	var history []recoverylog.Entry
	for b := range shards / perBlock {
		info := batch.BlockInfo{ID: batch.BlockID{Seq: uint64(b)}, Count: perBlock}
		for i := b * perBlock; i < (b+1)*perBlock; i++ {
			info.Ranges = append(info.Ranges, batch.SeqRange{Stream: name, Shard: shard(i),
				First: "49590338271490256608559692538361571095921575989136588898", Last: "49590338271490256608559692538361571095921575989136588899", Count: 1})
		}
		bt := batch.Time(1000 * (b + 1))
		history = append(history, recoverylog.BlockStored(info), recoverylog.BatchAllocated(bt, info.ID), recoverylog.BatchCompleted(bt))
	}
	var finished []recoverylog.Entry
	for i := range shards {
		finished = append(finished, recoverylog.ShardFinished(name, shard(i)))
	}
	for _, tt := range []struct {
		name      string
		entries   []recoverylog.Entry
		maxShards int // shards the compacted log may keep
	}{
		{"finished", append(slices.Clone(history), finished...), 0},
		{"not finished", history, shards},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfg(t)
			l := openDynamo(t, cfg)
			mustAppend(t, l, tt.entries...)
			want, err := recoverylog.Load(t.Context(), l)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Compact(t.Context()); err != nil {
				t.Fatalf("Compact: %v", err)
			}
			l.Close()
			l = openDynamo(t, cfg)
			got, err := recoverylog.Load(t.Context(), l)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, logtest.EquateEmpty()); diff != "" {
				t.Fatalf("State after Compact mismatch (-want +got):\n%s", diff)
			}
			if n := len(got.ShardSeqs); n > tt.maxShards {
				t.Errorf("the compacted log keeps %d shards, want at most %d", n, tt.maxShards)
			}
			entries, err := l.Read(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if b, _ := recoverylog.EncodeEntry(e); tt.maxShards == 0 && len(b) > 1<<10 {
					t.Errorf("%v encodes to %d bytes with every shard finished, want a small summary", e, len(b))
				}
			}
		})
	}
}

// testDynamoClaimRaced opens a log whose every claim another writer takes
// first, as a second worker given the same Name and opening the log over
// and over would: Open gives up, with an error naming that cause and the
// fix.
func testDynamoClaimRaced(t *testing.T, cfg dynamolog.Config) {
	real := cfg.Client
	cfg.Client = &faultyClient{Client: real, put: func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		if itemType(in) == "claim" {
			other := maps.Clone(in.Item)
			other["writer"] = &types.AttributeValueMemberS{Value: "another"}
			if _, err := real.PutItem(ctx, &dynamodb.PutItemInput{TableName: in.TableName, Item: other}); err != nil {
				return nil, err
			}
		}
		return real.PutItem(ctx, in)
	}}
	_, err := cfg.Open(t.Context())
	if err == nil || !strings.Contains(err.Error(), "fix:") || !strings.Contains(err.Error(), "Name") {
		t.Fatalf("Open whose every claim another writer takes: %v, want an error naming the fix (a Name of each worker's own)", err)
	}
}
