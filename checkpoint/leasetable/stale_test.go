package leasetable

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/checkpoint"
	"github.com/weirstream/weir/internal/localaws"
)

// TestCoordinatorBadItemRepairedWithinTakeCycle breaks a lease item, lets a
// scan report it, repairs it, and checks that the very next take cycle
// (no scan due: ScanInterval is minutes away) takes it: a repaired item is
// looked at every take cycle, not only at the next periodic scan.
func TestCoordinatorBadItemRepairedWithinTakeCycle(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "w1", db, nil)
	shards := shardIDs(2)
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	broken := badItems()["counter-string"]
	broken["leaseKey"] = str("shardId-broken")
	delete(broken, "leaseOwner")
	put(t, db, table, broken)
	for range 3 { // takes the good leases, then scans no more
		w.cycle(ctx)
	}
	if got := w.held(); len(got) != 2 || w.c.BadItems() != 1 {
		t.Fatalf("held %v, %d bad items; want the 2 good leases and 1 bad item", got, w.c.BadItems())
	}
	broken["leaseCounter"] = num(0)
	put(t, db, table, broken)
	w.cycle(ctx)
	if got := w.held(); len(got) != 3 {
		t.Errorf("after the repair and one take cycle: held %v, want the repaired lease too", got)
	}
	if n := w.c.BadItems(); n != 0 {
		t.Errorf("BadItems = %d after the repair, want 0", n)
	}
}

// TestCoordinatorEditedHeldItemReported removes the leaseCounter of a lease
// the worker holds: its next checkpoint fails, and the item is reported as
// unreadable at once (OnBadItem, logged with its leaseKey and the fix),
// once, however many cycles see it afterwards.
func TestCoordinatorEditedHeldItemReported(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	var logs syncBuf
	var mu sync.Mutex
	var reported []string
	w := newWorker(t, table, "w1", db, func(c *CoordinatorConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.OnBadItem = func(b *BadItemError) { mu.Lock(); reported = append(reported, b.Key+" "+b.Attr); mu.Unlock() }
	})
	shards := shardIDs(1)
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	shard := shards[0].ID
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: keyOf(shard), UpdateExpression: aws.String("REMOVE leaseCounter"),
	}); err != nil {
		t.Fatal(err)
	}
	err := w.c.Commit(ctx, shard, "49590338271490256608559692538361571095921575989136588898")
	if !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Commit on an edited item = %v, want ErrLeaseLost", err)
	}
	w.c.deliver()
	want := shard + " leaseCounter"
	mu.Lock()
	got := append([]string(nil), reported...)
	mu.Unlock()
	if len(got) != 1 || got[0] != want {
		t.Fatalf("reported at the failed write: %v, want [%s]", got, want)
	}
	for range 3 {
		w.cycle(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 {
		t.Errorf("reported %v over later cycles, want once", reported)
	}
	line := logs.String()
	if n := strings.Count(line, "lease item cannot be read"); n != 1 || !strings.Contains(line, "leaseKey="+shard) || !strings.Contains(line, "fix=") {
		t.Errorf("want one ERROR line with leaseKey and fix, got %d:\n%s", n, line)
	}
}

// put writes a raw item.
func put(t *testing.T, db *dynamodb.Client, table string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// String returns everything written.
func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
