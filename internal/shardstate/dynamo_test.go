package shardstate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/internal/dynamochunk"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/recovery/dynamolog"
)

var servers = localaws.NewShared(localaws.Options{DynamoDB: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// newTable returns a new table holding a recovery log (created by
// recovery/dynamolog, which creates the table): shard states share the
// recovery log table.
func newTable(tb testing.TB, c *dynamodb.Client) string {
	tb.Helper()
	name := localaws.UniqueName(tb)
	l, err := dynamolog.Config{Client: c, Table: name, Name: "a-recovery-log"}.Open(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	l.Close()
	return name
}

func newDynamo(tb testing.TB, c Client, table string) *Dynamo {
	tb.Helper()
	d, err := NewDynamo(DynamoConfig{Client: c, Table: table})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// TestDynamo runs the conformance cases on dynalite.
func TestDynamo(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	table := newTable(t, c)
	conformance(t, func(t *testing.T) Store { return newDynamo(t, c, table) })
}

// countItems returns the number of shard state items in table.
func countItems(t *testing.T, c *dynamodb.Client, table string) int {
	t.Helper()
	in := &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount, ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String("begins_with(#l, :p)"), ExpressionAttributeNames: map[string]string{"#l": attrLog},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str("shardstate/")}}
	n := 0
	for {
		out, err := c.Scan(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		n += int(out.Count) // a page reads at most 1 MB
		if len(out.LastEvaluatedKey) == 0 {
			return n
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// TestDynamoTornPut checks, on dynalite, that a Put whose chunk write fails
// half way (a crash between chunks) leaves the previous snapshot current and
// whole, and that the next Put deletes what it left, and the generation it
// replaces: the table holds the head and the current chunks only.
//
// The client keeps the SDK's standard retryer, as a real one does: the fault
// fails every attempt at the third chunk, so the Put fails all the same,
// while a connection the transport closes under load (a "use of closed
// network connection" read, which the retryer retries) does not fail the
// Gets and Puts around it.
func TestDynamoTornPut(t *testing.T) {
	env := servers.Env(t)
	tr, err := faults.New(faults.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = tr })
	table := newTable(t, c)
	d, err := NewDynamo(DynamoConfig{Client: c, Table: table, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000", Shape: "v1"}
	first := Snapshot{Data: testData(3*dynamochunk.Size, 1), Position: pos("100", 0), Lease: Lease{Counter: 1, Owner: "w"}}
	if err := d.Put(t.Context(), k, first); err != nil {
		t.Fatal(err)
	}
	// The third chunk of the next Put fails (and every write after it).
	if err := tr.SetRules(faults.Rule{Operation: "PutItem", Kind: faults.InternalFailure, Skip: 2}); err != nil {
		t.Fatal(err)
	}
	torn := Snapshot{Data: testData(4*dynamochunk.Size, 2), Position: pos("200", 0), Lease: Lease{Counter: 1, Owner: "w"}}
	if err := d.Put(t.Context(), k, torn); err == nil {
		t.Fatal("Put with a failing chunk write succeeded")
	}
	if n := tr.Injected("PutItem", faults.InternalFailure); n == 0 {
		t.Fatal("the torn Put failed before its third chunk write")
	}
	if err := tr.SetRules(); err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(t.Context(), k)
	if err != nil || !bytes.Equal(got.Data, first.Data) || got.Position != first.Position {
		t.Fatalf("Get after a torn Put: %d bytes at %v, %v; want the first snapshot, %d bytes at %v", len(got.Data), got.Position, err, len(first.Data), first.Position)
	}
	third := Snapshot{Data: testData(dynamochunk.Size+1, 3), Position: pos("300", 0), Lease: Lease{Counter: 1, Owner: "w"}}
	if err := d.Put(t.Context(), k, third); err != nil {
		t.Fatal(err)
	}
	if n := countItems(t, c, table); n != 1+2 {
		t.Errorf("%d items after the torn Put and the next; want the head and the 2 chunks of the current snapshot", n)
	}
	if got, err := d.Get(t.Context(), k); err != nil || !bytes.Equal(got.Data, third.Data) {
		t.Fatalf("Get: %d bytes, %v; want the third snapshot", len(got.Data), err)
	}
}

// TestDynamoGetDuringPut checks, on dynalite, that Gets running while Puts
// replace the snapshot see a whole snapshot, old or new, never a mix, and
// are not failed by the deletion of the generation they were reading.
func TestDynamoGetDuringPut(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	d := newDynamo(t, c, newTable(t, c))
	k := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000"}
	const puts = 8
	datas := make([][]byte, puts)
	for i := range datas {
		datas[i] = testData(3*dynamochunk.Size+i, byte(i))
	}
	put := func(i int) error {
		return d.Put(t.Context(), k, Snapshot{Data: datas[i], Position: pos(strconv.Itoa(100+i), 0), Lease: Lease{Counter: 1, Owner: "w"}})
	}
	if err := put(0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				got, err := d.Get(t.Context(), k)
				if err != nil {
					errs <- err
					return
				}
				i, _ := strconv.Atoi(got.Position.Sequence)
				if i -= 100; i < 0 || i >= puts || !bytes.Equal(got.Data, datas[i]) {
					errs <- errors.New("Get returned data that is not the snapshot its position names")
					return
				}
			}
		})
	}
	for i := 1; i < puts; i++ {
		if err := put(i); err != nil {
			t.Error(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// bigSize is the size of the large round trip: 20 MB, or
// WEIR_SHARDSTATE_MB megabytes (100 for the lease-take budget).
func bigSize(tb testing.TB) int {
	mb := 20
	if s := os.Getenv("WEIR_SHARDSTATE_MB"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			tb.Fatalf("WEIR_SHARDSTATE_MB=%q: want a positive whole number of megabytes", s)
		}
		mb = n
	}
	return mb << 20
}

// TestDynamoLarge round-trips a large snapshot on dynalite, and logs the
// times (see BenchmarkDynamo for the measure).
func TestDynamoLarge(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	d := newDynamo(t, c, newTable(t, c))
	k := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000"}
	snap := Snapshot{Data: testData(bigSize(t), 9), Position: pos("1", 0), Lease: Lease{Counter: 1, Owner: "w"}}
	start := time.Now()
	if err := d.Put(t.Context(), k, snap); err != nil {
		t.Fatal(err)
	}
	mid := time.Now()
	got, err := d.Get(t.Context(), k)
	if err != nil || !bytes.Equal(got.Data, snap.Data) {
		t.Fatalf("Get: %d bytes, %v; want the %d put", len(got.Data), err, len(snap.Data))
	}
	t.Logf("%d MB: Put %v, Get %v", len(snap.Data)>>20, mid.Sub(start), time.Since(mid))
}

// BenchmarkDynamo measures Put and Get of a snapshot of bigSize on dynalite.
func BenchmarkDynamo(b *testing.B) {
	c := servers.Env(b).DynamoDB()
	d := newDynamo(b, c, newTable(b, c))
	k := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000"}
	data := testData(bigSize(b), 9)
	b.Run("Put", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; b.Loop(); i++ {
			if err := d.Put(b.Context(), k, Snapshot{Data: data, Position: pos(strconv.Itoa(i+1), 0), Lease: Lease{Counter: 1, Owner: "w"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Get", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := d.Get(b.Context(), k); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// hookClient calls before with the key of each GetItem, and beforePut with
// the item of each PutItem, if set, before passing them on.
type hookClient struct {
	Client
	before    func(ctx context.Context, key map[string]types.AttributeValue)
	beforePut func(ctx context.Context, item map[string]types.AttributeValue)
	// update and put, if set, make each UpdateItem and PutItem: they are
	// given the call.
	update func(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	put    func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
}

func (h hookClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if h.update != nil {
		return h.update(ctx, in)
	}
	return h.Client.UpdateItem(ctx, in, optFns...)
}

func (h hookClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if h.before != nil {
		h.before(ctx, in.Key)
	}
	return h.Client.GetItem(ctx, in, optFns...)
}

func (h hookClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if h.beforePut != nil {
		h.beforePut(ctx, in.Item)
	}
	if h.put != nil {
		return h.put(ctx, in)
	}
	return h.Client.PutItem(ctx, in, optFns...)
}

// TestDynamoFencedPutLeavesNothing checks, on dynalite, that a fenced
// writer's Put leaves no chunk behind: refused before it writes one when the
// successor claimed first, and deleting those it wrote when the successor
// claims while it writes them. The successor's snapshot stays current.
func TestDynamoFencedPutLeavesNothing(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	table := newTable(t, c)
	k := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000"}
	successor := newDynamo(t, c, table)
	var claim func(ctx context.Context)
	zombie, err := NewDynamo(DynamoConfig{Table: table, Concurrency: 1, Client: hookClient{Client: c,
		beforePut: func(ctx context.Context, item map[string]types.AttributeValue) {
			if claim != nil && item[attrData] != nil {
				claim(ctx)
				claim = nil
			}
		}}})
	if err != nil {
		t.Fatal(err)
	}
	big := testData(3*dynamochunk.Size, 1)
	if err := zombie.Put(t.Context(), k, Snapshot{Data: big, Position: pos("100", 0), Lease: Lease{Counter: 5, Owner: "zombie"}}); err != nil {
		t.Fatal(err)
	}
	// The successor claims while the zombie writes its chunks.
	claim = func(ctx context.Context) {
		if err := successor.Claim(ctx, k, Lease{Counter: 6, Owner: "successor"}); err != nil {
			t.Error(err)
		}
	}
	if err := zombie.Put(t.Context(), k, Snapshot{Data: big, Position: pos("200", 0), Lease: Lease{Counter: 5, Owner: "zombie"}}); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie's Put during the claim: %v, want ErrFenced", err)
	}
	if n := countItems(t, c, table); n != 1+3 {
		t.Errorf("%d items after the zombie's fenced Put; want the head and the 3 chunks of its first snapshot", n)
	}
	// The successor claimed before this one starts.
	if err := zombie.Put(t.Context(), k, Snapshot{Data: big, Position: pos("300", 0), Lease: Lease{Counter: 5, Owner: "zombie"}}); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie's Put after the claim: %v, want ErrFenced", err)
	}
	if n := countItems(t, c, table); n != 1+3 {
		t.Errorf("%d items after the zombie's second fenced Put; want 4", n)
	}
	got, err := successor.Get(t.Context(), k)
	if err != nil || got.Position != pos("100", 0) {
		t.Fatalf("Get: at %v, %v; want the zombie's snapshot from before the claim, at 100", got.Position, err)
	}
}

// TestDynamoGetFollowsSwitch checks, on dynalite, a Get whose generation is
// replaced, and deleted, after it read the head and before it read the
// chunks: it reads the new generation, whole.
func TestDynamoGetFollowsSwitch(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	table := newTable(t, c)
	writer := newDynamo(t, c, table)
	k := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000"}
	old := Snapshot{Data: testData(2*dynamochunk.Size+1, 1), Position: pos("100", 0), Lease: Lease{Counter: 1, Owner: "w"}}
	next := Snapshot{Data: testData(3*dynamochunk.Size+2, 2), Position: pos("200", 0), Lease: Lease{Counter: 1, Owner: "w"}}
	if err := writer.Put(t.Context(), k, old); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	reader, err := NewDynamo(DynamoConfig{Table: table, Concurrency: 1, Client: hookClient{Client: c,
		before: func(ctx context.Context, key map[string]types.AttributeValue) {
			if sAttr(key, attrLog) == "shardstate/app/s/shardId-000000000000" {
				return // the head
			}
			once.Do(func() {
				if err := writer.Put(ctx, k, next); err != nil {
					t.Error(err)
				}
			})
		}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := reader.Get(t.Context(), k)
	if err != nil || !bytes.Equal(got.Data, next.Data) || got.Position != next.Position {
		t.Fatalf("Get across a switch: %d bytes at %v, %v; want the new snapshot, %d bytes at %v", len(got.Data), got.Position, err, len(next.Data), next.Position)
	}
}

// TestDynamoRetriedClaimKeepsSnapshot: a Put's first write applied but
// answered with an error, which the SDK retries (a lost response), returns
// the Put's own generation as the pending one; the Put must not delete it
// once it is current, and the next Get reads the snapshot whole.
func TestDynamoRetriedClaimKeepsSnapshot(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	table := newTable(t, c)
	k := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000"}
	twice := hookClient{Client: c, update: func(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		if _, err := c.UpdateItem(ctx, in); err != nil {
			return nil, err
		}
		return c.UpdateItem(ctx, in) // the SDK's retry: the first was applied
	}}
	d, err := NewDynamo(DynamoConfig{Table: table, Client: twice})
	if err != nil {
		t.Fatal(err)
	}
	l := Lease{Counter: 1, Owner: "w"}
	for i, seq := range []string{"10", "20"} {
		data := bytes.Repeat([]byte{byte(i + 1)}, 700<<10)
		if err := d.Put(t.Context(), k, Snapshot{Data: data, Position: Position{Sequence: seq}, Lease: l}); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
		got, err := d.Get(t.Context(), k)
		if err != nil {
			t.Fatalf("Get after Put %d: %v", i, err)
		}
		if !bytes.Equal(got.Data, data) || got.Position.Sequence != seq {
			t.Fatalf("Get after Put %d: %d bytes at %q, want %d at %q", i, len(got.Data), got.Position.Sequence, len(data), seq)
		}
	}
}

// TestDynamoRetriedSwitchKeepsSnapshot: a zombie's head switch applied but
// answered with an error, retried by the SDK after the successor claimed
// the shard, fails its condition; the zombie must not delete the
// generation the head now names, which the successor reads.
func TestDynamoRetriedSwitchKeepsSnapshot(t *testing.T) {
	c := servers.Env(t).DynamoDB()
	table := newTable(t, c)
	k := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000"}
	successor := newDynamo(t, c, table)
	zombie, err := NewDynamo(DynamoConfig{Table: table, Client: hookClient{Client: c,
		put: func(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			if _, isHead := in.Item[attrGen]; !isHead {
				return c.PutItem(ctx, in)
			}
			if _, err := c.PutItem(ctx, in); err != nil { // applied, its answer lost
				return nil, err
			}
			if err := successor.Claim(ctx, k, Lease{Counter: 2, Owner: "successor"}); err != nil {
				t.Errorf("successor's Claim: %v", err)
			}
			return c.PutItem(ctx, in) // the SDK's retry
		}}})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{7}, 700<<10)
	err = zombie.Put(t.Context(), k, Snapshot{Data: data, Position: Position{Sequence: "10"}, Lease: Lease{Counter: 1, Owner: "zombie"}})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie's Put: %v, want ErrFenced (its retried switch fails)", err)
	}
	got, err := successor.Get(t.Context(), k)
	if err != nil || !bytes.Equal(got.Data, data) {
		t.Fatalf("successor's Get: %d bytes, %v; want the zombie's applied snapshot whole", len(got.Data), err)
	}
}
