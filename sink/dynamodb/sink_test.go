package dynamodb_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/sink/dynamodb"
)

// TestReplayedBatchAppliesOnce checks, against dynalite, that running a
// batch again (as the driver does after a crash) and running an older batch
// after a newer one leave the table as one run of each batch in time order
// did: updates (ADD) counted once, puts of one item in record order, no
// item moved back.
func TestReplayedBatchAppliesOnce(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	s := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: 4})
	first := batch.New(1_700_000_000_000, nil, events(40, 7, true)[:25], events(40, 7, true)[25:])
	second := batch.New(1_700_000_001_000, nil, events(30, 5, true))
	for _, b := range []*batch.Batch[event]{first, first, second, first, second} {
		if err := s.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	want := apply(apply(nil, first.Records()...), second.Records()...)
	if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	st := s.Stats()
	if st.Written != int64(first.Len()+second.Len()) || st.Skipped != int64(2*first.Len()+second.Len()) {
		t.Errorf("Stats %+v: want %d written, %d skipped", st, first.Len()+second.Len(), 2*first.Len()+second.Len())
	}
	// item-0's last write is the second batch's sixth of it (records 0, 5,
	// ..., 25): ordinal 5.
	if got, want := versions(t, c, table)["item-0"], "1700000001000000000005"; got != want {
		t.Errorf("item-0's version %s, want %s", got, want)
	}
}

// TestInterruptedBatchRunAgain checks, against dynalite, that a batch whose
// writes were cut short after some had landed (a crash mid-output) and that
// runs again applies the rest once: the table is that of an uninterrupted
// run. The cut comes after every count of writes in turn.
func TestInterruptedBatchRunAgain(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	c := env.DynamoDB()
	ctx := t.Context()
	recs := events(24, 5, true)
	b := batch.New(1_700_000_000_000, nil, recs)
	want := apply(nil, recs...)
	for cut := 0; cut <= len(recs); cut += 3 {
		table := createTable(t, c)
		crashing := &cutClient{Client: c, after: cut}
		s := newSink(t, ctx, dynamodb.Config{Client: crashing, Table: table, Concurrency: 3})
		err := s.Write(ctx, b)
		if cut < len(recs) && !errors.Is(err, errCrash) {
			t.Fatalf("cut after %d: Write: %v, want the crash", cut, err)
		}
		if err := newSink(t, ctx, dynamodb.Config{Client: c, Table: table, Concurrency: 3}).Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, scan(t, c, table)); diff != "" {
			t.Errorf("cut after %d writes: table (-want +got):\n%s", cut, diff)
		}
	}
}

var errCrash = errors.New("crash")

// cutClient lets the first after writes through, then fails every write.
type cutClient struct {
	dynamodb.Client
	mu    sync.Mutex
	after int
}

func (c *cutClient) pass() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after--
	return c.after >= 0
}

func (c *cutClient) PutItem(ctx context.Context, in *ddb.PutItemInput, o ...func(*ddb.Options)) (*ddb.PutItemOutput, error) {
	if !c.pass() {
		return nil, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: crashError{}}
	}
	return c.Client.PutItem(ctx, in, o...)
}

func (c *cutClient) UpdateItem(ctx context.Context, in *ddb.UpdateItemInput, o ...func(*ddb.Options)) (*ddb.UpdateItemOutput, error) {
	if !c.pass() {
		return nil, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: crashError{}}
	}
	return c.Client.UpdateItem(ctx, in, o...)
}

// crashError is a refused write (a client fault no retry fixes) that is
// errCrash.
type crashError struct{}

func (crashError) Error() string                 { return "crash" }
func (crashError) ErrorCode() string             { return "Crash" }
func (crashError) ErrorMessage() string          { return "crash" }
func (crashError) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }
func (crashError) Is(err error) bool             { return err == errCrash }

// TestWritesOfOneItemInOrder checks that the writes of one item are never
// in flight together and reach DynamoDB in record order, while writes of
// different items run in parallel up to Concurrency.
func TestWritesOfOneItemInOrder(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	watch := &watchClient{Client: c, inFlight: map[string]bool{}, last: map[string]string{}}
	const par = 4
	s := newSink(t, ctx, dynamodb.Config{Client: watch, Table: table, Concurrency: par})
	b := batch.New(1_700_000_000_000, nil, events(200, 20, true))
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	if watch.err != nil {
		t.Fatal(watch.err)
	}
	if watch.max > par {
		t.Errorf("%d writes in flight at once, want at most %d", watch.max, par)
	}
	if diff := cmp.Diff(apply(nil, b.Records()...), scan(t, c, table)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

// watchClient checks that no two writes of one item are in flight together
// and that each item's versions increase, and records the most writes in
// flight.
type watchClient struct {
	dynamodb.Client
	mu       sync.Mutex
	inFlight map[string]bool
	last     map[string]string // version of each item's last write
	n, max   int
	err      error
}

func (c *watchClient) start(key map[string]types.AttributeValue, vs map[string]types.AttributeValue) string {
	id := key["id"].(*types.AttributeValueMemberS).Value
	v := vs[":weirVersion"].(*types.AttributeValueMemberN).Value
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.inFlight[id] && c.err == nil:
		c.err = errors.New("two writes of " + id + " in flight at once")
	case len(v) < len(c.last[id]) || len(v) == len(c.last[id]) && v <= c.last[id]:
		c.err = errors.New("write of " + id + " at version " + v + " after " + c.last[id])
	}
	c.inFlight[id], c.last[id] = true, v
	c.n++
	c.max = max(c.max, c.n)
	return id
}

func (c *watchClient) end(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight[id] = false
	c.n--
}

func (c *watchClient) PutItem(ctx context.Context, in *ddb.PutItemInput, o ...func(*ddb.Options)) (*ddb.PutItemOutput, error) {
	id := c.start(map[string]types.AttributeValue{"id": in.Item["id"]}, in.ExpressionAttributeValues)
	defer c.end(id)
	return c.Client.PutItem(ctx, in, o...)
}

func (c *watchClient) UpdateItem(ctx context.Context, in *ddb.UpdateItemInput, o ...func(*ddb.Options)) (*ddb.UpdateItemOutput, error) {
	id := c.start(in.Key, in.ExpressionAttributeValues)
	defer c.end(id)
	return c.Client.UpdateItem(ctx, in, o...)
}

// TestItemTooLarge checks that a put of an item over 400 KB, attribute
// names counted, fails its batch with ErrItemTooLarge naming the table and
// the key, before sending any write of the batch; and that an update
// DynamoDB refuses for the item's size fails the batch naming them too.
func TestItemTooLarge(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	// id "big" (2+3 bytes), the version (11 bytes of name, and 2 of value:
	// 1700000000000000000000 has two significant digits) and a value whose
	// name and bytes make the rest exactly fit, then one byte over.
	const name = "payload"
	fits := dynamodb.MaxItemSize - len("id") - len("big") - len(dynamodb.DefaultVersionAttribute) - 2 - len(name)
	for _, tc := range []struct {
		size    int
		wantErr bool
	}{{fits, false}, {fits + 1, true}} {
		s, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: table, Concurrency: 1}, func(n int) (dynamodb.Write, error) {
			if n == 0 {
				return dynamodb.Write{Item: map[string]types.AttributeValue{"id": str("small")}}, nil
			}
			return dynamodb.Write{Item: map[string]types.AttributeValue{"id": str("big"), name: str(strings.Repeat("x", n))}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Write(ctx, batch.New(1_700_000_000_000, nil, []int{0, tc.size}))
		switch {
		case tc.wantErr && s.Stats().Written != 0:
			t.Errorf("put of %d bytes: %d writes of the batch sent before it failed, want none", tc.size, s.Stats().Written)
		case !tc.wantErr && err != nil:
			t.Errorf("put of %d bytes: %v", tc.size, err)
		case tc.wantErr && !errors.Is(err, dynamodb.ErrItemTooLarge):
			t.Errorf("put of %d bytes: error %v, want ErrItemTooLarge", tc.size, err)
		case tc.wantErr && (!strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), `id: "big"`)):
			t.Errorf("error %q does not name the table %s and the key", err, table)
		}
	}
	// An update that grows the item past the limit: DynamoDB refuses it.
	s, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: table}, func(n int) (dynamodb.Write, error) {
		return dynamodb.Write{
			Key:    map[string]types.AttributeValue{"id": str("big")},
			Update: "SET more = :m", Values: map[string]types.AttributeValue{":m": str(strings.Repeat("y", n))},
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Write(ctx, batch.New(1_700_000_100_000, nil, []int{1000}))
	if err == nil || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), `id: "big"`) {
		t.Errorf("update past the limit: error %v, want one naming the table %s and the key", err, table)
	}
}

// TestRefusedWriteNamesFix checks, against dynalite, that a write refused
// for good fails its batch with an error that names the fix as well as the
// table and the key: for access denied (injected through a fault-injecting
// HTTP client), the IAM action to allow and where the sink's policy is; for
// a table deleted after New, or missing at New, to create it or check
// Table, region and Endpoint.
func TestRefusedWriteNamesFix(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	setup := env.DynamoDB()
	ctx := t.Context()
	b := batch.New(1_700_000_000_000, nil, events(1, 1, false))
	t.Run("access denied", func(t *testing.T) {
		table := createTable(t, setup)
		tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "UpdateItem", Kind: faults.AccessDenied}}})
		if err != nil {
			t.Fatal(err)
		}
		s := newSink(t, ctx, dynamodb.Config{Client: env.DynamoDB(func(o *ddb.Options) { o.HTTPClient = tr }), Table: table})
		err = s.Write(ctx, b)
		for _, want := range []string{table, `id: "item-0"`, "AccessDeniedException", "fix: allow dynamodb:UpdateItem on table " + table, "docs/iam/dynamodb-sink.json"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Write denied: error %v, want one containing %q", err, want)
			}
		}
	})
	t.Run("table deleted", func(t *testing.T) {
		table := createTable(t, setup)
		s := newSink(t, ctx, dynamodb.Config{Client: setup, Table: table})
		if _, err := setup.DeleteTable(ctx, &ddb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Fatal(err)
		}
		err := s.Write(ctx, b)
		for _, want := range []string{`id: "item-0"`, "ResourceNotFoundException", "fix: table " + table + " does not exist"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Write to a deleted table: error %v, want one containing %q", err, want)
			}
		}
	})
	t.Run("no table at New", func(t *testing.T) {
		_, err := dynamodb.New(ctx, dynamodb.Config{Client: setup, Table: "missing"}, toWrite)
		if want := "fix: table missing does not exist at "; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with a missing table: error %v, want one containing %q", err, want)
		}
	})
}

// TestSinksSharingItemsNeedTheirOwnVersionAttribute checks, against
// dynalite, what Config.VersionAttribute says: two Sinks writing the same
// items in the same batch (one counts, the other keeps the last value)
// give their writes the same versions, so with one version attribute the
// second Sink's writes are skipped as already applied, and lost; each with
// its own, both apply.
func TestSinksSharingItemsNeedTheirOwnVersionAttribute(t *testing.T) {
	t.Parallel()
	c, ctx := servers.Env(t).DynamoDB(), t.Context()
	count := func(e event) (dynamodb.Write, error) {
		return dynamodb.Write{Key: map[string]types.AttributeValue{"id": str(e.ID)}, Update: "ADD hits :one",
			Values: map[string]types.AttributeValue{":one": num(1)}}, nil
	}
	last := func(e event) (dynamodb.Write, error) {
		return dynamodb.Write{Key: map[string]types.AttributeValue{"id": str(e.ID)}, Update: "SET #last = :n",
			Names: map[string]string{"#last": "last"}, Values: map[string]types.AttributeValue{":n": num(e.N)}}, nil
	}
	b := batch.New(1_700_000_000_000, nil, []event{{ID: "a", N: 1}, {ID: "a", N: 2}})
	for _, tc := range []struct {
		name     string
		versions [2]string
		want     map[string]map[string]string
	}{
		{"one version attribute", [2]string{"", ""}, map[string]map[string]string{"a": {"hits": "2"}}},
		{"one each", [2]string{"countVersion", "lastVersion"}, map[string]map[string]string{"a": {"hits": "2", "last": "2", "countVersion": "1700000000000000000001", "lastVersion": "1700000000000000000001"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := createTable(t, c)
			for i, f := range []func(event) (dynamodb.Write, error){count, last} {
				s, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: table, VersionAttribute: tc.versions[i]}, f)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Write(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, scan(t, c, table)); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewInvalidTableName checks, on dynalite, that New refuses a Table
// name DynamoDB does not accept (3 to 255 of a-z A-Z 0-9 _ . -) before
// any call, as invalid config naming the rule, not with DynamoDB's
// ValidationException.
func TestNewInvalidTableName(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	for _, name := range []string{"ab", "my table", strings.Repeat("t", 256)} {
		_, err := dynamodb.New(t.Context(), dynamodb.Config{Client: c, Table: name}, func(string) (dynamodb.Write, error) { return dynamodb.Write{}, nil })
		if !errors.Is(err, dynamodb.ErrInvalidConfig) || !strings.Contains(err.Error(), "Table: table name") {
			t.Errorf("New with Table %.20q...: %v, want ErrInvalidConfig naming the Table's rule", name, err)
		}
	}
}

// statusClient answers DescribeTable with the table's description from
// DynamoDB, its status replaced by status: dynalite has no KMS keys to
// lose, so it never archives a table.
type statusClient struct {
	dynamodb.Client
	status types.TableStatus
}

func (c statusClient) DescribeTable(ctx context.Context, in *ddb.DescribeTableInput, o ...func(*ddb.Options)) (*ddb.DescribeTableOutput, error) {
	out, err := c.Client.DescribeTable(ctx, in, o...)
	if err == nil {
		out.Table.TableStatus = c.status
	}
	return out, err
}

// TestNewStuckTable checks, on dynalite, that New refuses a table whose
// status no wait cures (its KMS key inaccessible, or archived for it),
// naming the status and the fix, rather than returning a Sink whose every
// write fails.
func TestNewStuckTable(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	table := createTable(t, c)
	for _, status := range []types.TableStatus{types.TableStatusInaccessibleEncryptionCredentials, types.TableStatusArchived} {
		_, err := dynamodb.New(t.Context(), dynamodb.Config{Client: statusClient{Client: c, status: status}, Table: table},
			func(string) (dynamodb.Write, error) { return dynamodb.Write{}, nil })
		if err == nil || !strings.Contains(err.Error(), string(status)) || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("New on a %s table: %v, want an error naming the status and the fix", status, err)
		}
	}
}

// creatingClient is a DynamoDB whose table "events" (partition key id) is
// CREATING for the first `creating` DescribeTable calls, then ACTIVE, and
// counts the calls. Only New's reading of the status is tested with it
// (dynalite makes a table ACTIVE at once); the calls themselves are
// tested against dynalite.
type creatingClient struct {
	dynamodb.Client // nil: any other call panics
	creating        int
	describes       int
}

func (c *creatingClient) DescribeTable(_ context.Context, in *ddb.DescribeTableInput, _ ...func(*ddb.Options)) (*ddb.DescribeTableOutput, error) {
	c.describes++
	status := types.TableStatusActive
	if c.describes <= c.creating {
		status = types.TableStatusCreating
	}
	return &ddb.DescribeTableOutput{Table: &types.TableDescription{
		TableName: in.TableName, TableStatus: status,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	}}, nil
}

// TestNewCreatingTable checks, in virtual time, that New waits for a table
// still CREATING (created just before the pipeline started, or being
// restored from a backup, which takes 20 minutes to hours), whose writes
// DynamoDB would refuse, until it is ACTIVE, however long that takes: the
// table is the user's, so only ctx bounds the wait, which is logged at WARN
// after 30 s and again every 5 minutes, naming the table and its status;
// and that a table that stays CREATING ends New when ctx does, with an
// error naming the table, its status and the fix.
func TestNewCreatingTable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		creating int // DescribeTable calls answered CREATING, about 2 s apart
		wantErr  bool
		minWarns int
	}{
		{"then active", 3, false, 0},
		{"restored for an hour, then active", 2400, false, 10},
		{"for good", 1 << 30, true, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				c := &creatingClient{creating: tc.creating}
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Hour) // virtual: a bound, not a measure
				defer cancel()
				_, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: "events", Logger: slog.New(slog.NewTextHandler(&logs, nil))},
					func(string) (dynamodb.Write, error) { return dynamodb.Write{}, nil })
				text := logs.String()
				if warns := strings.Count(text, "level=WARN"); warns < tc.minWarns || warns != strings.Count(text, "table=events status=CREATING") {
					t.Errorf("%d WARNs, want at least %d, each naming the table and its status:\n%s", warns, tc.minWarns, text)
				}
				if !tc.wantErr {
					if err != nil || c.describes != tc.creating+1 {
						t.Fatalf("New: %v after %d DescribeTable calls, want success after %d", err, c.describes, tc.creating+1)
					}
					return
				}
				if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "events") ||
					!strings.Contains(err.Error(), "CREATING") || !strings.Contains(err.Error(), "fix:") {
					t.Fatalf("New on a table that stays CREATING: %v, want ctx's error naming the table, its status and the fix", err)
				}
			})
		})
	}
}

// undescribedClient answers DescribeTable with no table description, as
// DynamoDB never does and a fake client might.
type undescribedClient struct {
	dynamodb.Client // nil: any other call panics
}

func (undescribedClient) DescribeTable(context.Context, *ddb.DescribeTableInput, ...func(*ddb.Options)) (*ddb.DescribeTableOutput, error) {
	return &ddb.DescribeTableOutput{}, nil
}

// TestNewUndescribedTable checks that New, given a client whose
// DescribeTable answer holds no table description, fails naming the table
// and the fix instead of panicking.
func TestNewUndescribedTable(t *testing.T) {
	_, err := dynamodb.New(t.Context(), dynamodb.Config{Client: undescribedClient{}, Table: "events"},
		func(string) (dynamodb.Write, error) { return dynamodb.Write{}, nil })
	if err == nil || !strings.Contains(err.Error(), "events") || !strings.Contains(err.Error(), "no table description") {
		t.Fatalf("New with a client answering no table description: %v, want an error naming the table and the fix", err)
	}
}

// TestUnsendableWriteFailsBatch checks, against dynalite, that a Write
// holding a value the SDK cannot send (a nil pointer of an attribute
// value type, which panics in its serializer, or a nil value in a map,
// which it sends as no value) fails its batch with an error naming the
// table, the item's key and the attribute, before any write of the batch
// is sent. A nil pointer crashed the process: the SDK's serializer, or
// the Sink's item size, panicked in a goroutine of Write. A string that is
// not valid UTF-8 is refused too (strings.ToValidUTF8 or a binary value is
// the fix).
func TestUnsendableWriteFailsBatch(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	var (
		nilS = (*types.AttributeValueMemberS)(nil)
		nilN = (*types.AttributeValueMemberN)(nil)
	)
	for _, tc := range []struct {
		name string
		w    dynamodb.Write
		want string
	}{
		{"nil pointer in Item", dynamodb.Write{Item: map[string]types.AttributeValue{"id": str("a"), "x": nilS}},
			`Item["x"]: a nil *types.AttributeValueMemberS`},
		{"nil pointer in Values", dynamodb.Write{Key: map[string]types.AttributeValue{"id": str("a")}, Update: "SET x = :x",
			Values: map[string]types.AttributeValue{":x": nilN}}, `Values[":x"]: a nil *types.AttributeValueMemberN`},
		{"nil pointer in a map", dynamodb.Write{Item: map[string]types.AttributeValue{"id": str("a"),
			"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"y": nilS}}}}, `Item["m"]["y"]: a nil *types.AttributeValueMemberS`},
		{"nil pointer in a list", dynamodb.Write{Key: map[string]types.AttributeValue{"id": str("a")}, Update: "SET l = :l",
			Values: map[string]types.AttributeValue{":l": &types.AttributeValueMemberL{Value: []types.AttributeValue{str("z"), nilN}}}},
			`Values[":l"][1]: a nil *types.AttributeValueMemberN`},
		{"nil in Item", dynamodb.Write{Item: map[string]types.AttributeValue{"id": str("a"), "x": nil}}, `Item["x"]: a nil value`},
		{"nil pointer key", dynamodb.Write{Key: map[string]types.AttributeValue{"id": nilS}, Update: "ADD n :one",
			Values: map[string]types.AttributeValue{":one": num(1)}}, `Key["id"]: a nil *types.AttributeValueMemberS`},
		// The SDK sends each invalid byte as U+FFFD: keys "a\xff" and
		// "a\xfe" would be one item, one's update skipped as applied.
		{"invalid UTF-8 key", dynamodb.Write{Key: map[string]types.AttributeValue{"id": str("a\xff")}, Update: "ADD n :one",
			Values: map[string]types.AttributeValue{":one": num(1)}}, `Key["id"]: a string that is not valid UTF-8`},
		{"invalid UTF-8 in a string set", dynamodb.Write{Item: map[string]types.AttributeValue{"id": str("a"),
			"ss": &types.AttributeValueMemberSS{Value: []string{"ok", "b\xfe"}}}}, `Item["ss"][1]: a string that is not valid UTF-8`},
		{"invalid UTF-8 attribute name", dynamodb.Write{Item: map[string]types.AttributeValue{"id": str("a"), "x\xff": num(1)}},
			`a string that is not valid UTF-8`},
		{"invalid UTF-8 in Names", dynamodb.Write{Key: map[string]types.AttributeValue{"id": str("a")}, Update: "SET #x = :one",
			Names: map[string]string{"#x": "x\xff"}, Values: map[string]types.AttributeValue{":one": num(1)}}, `Names["#x"]: a string that is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := dynamodb.New(ctx, dynamodb.Config{Client: c, Table: table}, func(n int) (dynamodb.Write, error) {
				if n == 0 {
					return tc.w, nil
				}
				return dynamodb.Write{Item: map[string]types.AttributeValue{"id": str("ok-" + strconv.Itoa(n))}}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Write(ctx, batch.New(1_700_000_000_000, nil, []int{1, 2, 0, 3}))
			for _, want := range []string{table, "invalid Write", tc.want} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Write = %v, want an error containing %q", err, want)
				}
			}
			if st := s.Stats(); st.Written != 0 {
				t.Errorf("%d writes sent, want none: the batch's Writes are checked before any is sent", st.Written)
			}
		})
	}
}

// panickingClient panics in UpdateItem, as a user's wrapped Client with a
// bug may.
type panickingClient struct{ dynamodb.Client }

func (panickingClient) UpdateItem(context.Context, *ddb.UpdateItemInput, ...func(*ddb.Options)) (*ddb.UpdateItemOutput, error) {
	panic("wrapped client bug")
}

// TestPanickingClientFailsBatch checks, against dynalite, that a Client
// that panics while Write sends a write fails the batch with an error
// holding the panic and its stack: it crashed the process, the panic
// being in a goroutine of Write, where no caller recovers it.
func TestPanickingClientFailsBatch(t *testing.T) {
	t.Parallel()
	c, table, ctx := setup(t)
	s := newSink(t, ctx, dynamodb.Config{Client: panickingClient{c}, Table: table})
	err := s.Write(ctx, batch.New(1_700_000_000_000, nil, events(3, 3, false)))
	for _, want := range []string{table, "panic: wrapped client bug", "panickingClient.UpdateItem"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Write = %v, want an error containing %q", err, want)
		}
	}
}

// taggedClient is a client wrapper of a type that cannot be compared, and
// wrappedClient one that can, holding such a value: hashing it panics.
type taggedClient struct {
	dynamodb.Client
	tags []string
}

type wrappedClient struct{ dynamodb.Client }

// TestNewWithUnhashableClient: a Config.Client of a comparable type that
// holds a value that cannot be hashed made New panic (the key of the
// record of items written that Sinks share); it now gets a record of its
// own and writes.
func TestNewWithUnhashableClient(t *testing.T) {
	c, table, ctx := setup(t)
	client := wrappedClient{taggedClient{Client: c, tags: []string{"team"}}}
	s := newSink(t, ctx, dynamodb.Config{Client: client, Table: table})
	if err := s.Write(ctx, batch.New(1_700_000_000_000, nil, events(2, 2, false))); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Written != 2 {
		t.Errorf("Stats = %+v, want 2 written", st)
	}
}
