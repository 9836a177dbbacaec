package leasetable

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/weirstream/weir/checkpoint"
	"github.com/weirstream/weir/internal/localaws"
)

// countingDB counts the calls of a DynamoDB client and the items they read
// and write.
type countingDB struct {
	DynamoDBAPI

	mu                    sync.Mutex
	scans, gets           int
	itemsRead, itemsWrote int
}

func (d *countingDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := d.DynamoDBAPI.Scan(ctx, in, o...)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scans++
	if err == nil {
		d.itemsRead += len(out.Items)
	}
	return out, err
}

func (d *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := d.DynamoDBAPI.GetItem(ctx, in, o...)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gets++
	if err == nil && out.Item != nil {
		d.itemsRead++
	}
	return out, err
}

func (d *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	d.mu.Lock()
	d.itemsWrote++
	d.mu.Unlock()
	return d.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

func (d *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	d.mu.Lock()
	d.itemsWrote++
	d.mu.Unlock()
	return d.DynamoDBAPI.PutItem(ctx, in, o...)
}

func (d *countingDB) counts() (scans, gets, read, wrote int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.scans, d.gets, d.itemsRead, d.itemsWrote
}

// TestLivenessDeadWorkerTakenOver checks the default liveness in virtual
// time: a live worker renews one lease per period whatever it holds; the
// other reads one lease of it per period and never scans the table while
// nothing changes; once the first worker dies, its leases are taken at the
// first take cycle LeaseDuration after the observation of its last
// renewal, after one confirming scan.
func TestLivenessDeadWorkerTakenOver(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	c1, c2 := &countingDB{DynamoDBAPI: db}, &countingDB{DynamoDBAPI: db}
	w1 := newWorker(t, table, "w1", c1, nil)
	w2 := newWorker(t, table, "w2", c2, func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 })
	shards := shardIDs(4)
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	w2.cycle(ctx)
	if len(w1.held()) != 4 || len(w2.held()) != 0 {
		t.Fatalf("w1 holds %v, w2 %v", w1.held(), w2.held())
	}
	period := w1.c.cfg.RenewInterval
	_, _, _, wrote0 := c1.counts()
	scans0, gets0, _, _ := c2.counts()
	const periods = 6
	for range periods {
		w1.clk.Advance(period)
		w2.clk.Advance(period)
		w1.c.renewCycle(ctx)
		w2.c.takeCycle(ctx)
	}
	_, _, _, wrote := c1.counts()
	scans, gets, _, _ := c2.counts()
	if wrote-wrote0 != periods || scans != scans0 || gets-gets0 != periods {
		t.Errorf("in %d periods: w1 wrote %d items (want %d), w2 scanned %d times (want 0) and read %d leases (want %d)",
			periods, wrote-wrote0, periods, scans-scans0, gets-gets0, periods)
	}
	// w1 dies: its last renewal was just observed by w2's last cycle.
	lease := w1.c.cfg.LeaseDuration
	var waited int
	for len(w2.held()) == 0 {
		w2.clk.Advance(period)
		waited++
		w2.c.takeCycle(ctx)
		if waited > 10 {
			t.Fatal("w1's leases never taken")
		}
	}
	if got, want := period*time.Duration(waited), (lease+period-1)/period*period; got != want {
		t.Errorf("taken %v after the observation of the last renewal, want %v (the first cycle at least LeaseDuration %v later)", got, want, lease)
	}
	if len(w2.held()) != 4 {
		t.Errorf("w2 took %v, want all 4", w2.held())
	}
	if s, _, _, _ := c2.counts(); s != scans0+1 {
		t.Errorf("w2 scanned %d times to take over, want 1", s-scans0)
	}
}

// TestLivenessStolenLeaseLostAtCheckpoint checks that a worker a lease was
// stolen from (it learns of steals at its next scan) loses it at its next
// checkpoint of the shard, which fails and writes nothing.
func TestLivenessStolenLeaseLostAtCheckpoint(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 := newWorker(t, table, "w1", db, nil)
	w2 := newWorker(t, table, "w2", db, nil)
	if err := w1.c.SyncShards(ctx, shardIDs(2)); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	w2.cycle(ctx) // steals one
	stolen := w2.held()
	if len(stolen) != 1 || len(w1.held()) != 2 {
		t.Fatalf("w1 holds %v, w2 %v; want w2 to have stolen one", w1.held(), w2.held())
	}
	if err := w1.c.Commit(ctx, stolen[0], "100"); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("w1's checkpoint of the stolen lease = %v, want ErrLeaseLost", err)
	}
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 1 || lost[0] != stolen[0] {
		t.Errorf("w1 lost %v, want %v", lost, stolen)
	}
	if l := mustGet(t, w2.c.Table(), stolen[0]); l.Owner != "w2" || l.Checkpoint == "100" {
		t.Errorf("stolen lease after the zombie checkpoint: %+v", l)
	}
}

// TestLivenessDrainedLeasesTakenAtOnce checks that a worker's graceful
// handoff is seen at the next take cycle, not the next periodic scan: the
// lease the other worker reads between scans is released with the rest.
func TestLivenessDrainedLeasesTakenAtOnce(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 := newWorker(t, table, "w1", db, nil)
	w2 := newWorker(t, table, "w2", db, nil)
	if err := w1.c.SyncShards(ctx, shardIDs(4)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w1.cycle(ctx)
		w2.cycle(ctx)
		w1.clk.Advance(w1.c.cfg.TakeInterval)
		w2.clk.Advance(w2.c.cfg.TakeInterval)
	}
	if err := checkSpread([]*worker{w1, w2}, 4); err != nil {
		t.Fatal(err)
	}
	if err := w1.c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	w2.clk.Advance(w2.c.cfg.TakeInterval)
	w2.c.takeCycle(ctx)
	if len(w2.held()) != 4 {
		t.Errorf("w2 holds %v one take cycle after w1 drained, want all 4", w2.held())
	}
}
