package leasetable

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/checkpoint"
	"github.com/weirstream/weir/internal/localaws"
)

// countingDB counts the calls of a DynamoDB client, the items they read
// and write, and the capacity units they consume as the server reports
// them (ReturnConsumedCapacity TOTAL: DynamoDB's billing units, which
// dynalite computes by DynamoDB's rules: a read of up to 4 KB is one unit
// consistent and half eventually consistent, a scan's items counted
// together; a write of up to 1 KB is one). A write whose condition fails
// is billed by DynamoDB but not counted here.
type countingDB struct {
	DynamoDBAPI

	mu                    sync.Mutex
	scans, gets           int
	itemsRead, itemsWrote int
	rcu, wcu              float64
}

// note adds one call's counts: a scan or a get, the items it read or
// wrote, and the capacity units it consumed.
func (d *countingDB) note(scan, get bool, read, wrote int, c *types.ConsumedCapacity, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if scan {
		d.scans++
	}
	if get {
		d.gets++
	}
	d.itemsWrote += wrote // a failed write counts: it may have been applied
	if err != nil {
		return
	}
	d.itemsRead += read
	if c == nil || c.CapacityUnits == nil {
		return
	}
	if wrote > 0 {
		d.wcu += *c.CapacityUnits
	} else {
		d.rcu += *c.CapacityUnits
	}
}

func (d *countingDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := d.DynamoDBAPI.Scan(ctx, in, o...)
	if err != nil {
		d.note(true, false, 0, 0, nil, err)
		return out, err
	}
	d.note(true, false, len(out.Items), 0, out.ConsumedCapacity, nil)
	return out, nil
}

func (d *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := d.DynamoDBAPI.GetItem(ctx, in, o...)
	if err != nil {
		d.note(false, true, 0, 0, nil, err)
		return out, err
	}
	read := 0
	if out.Item != nil {
		read = 1
	}
	d.note(false, true, read, 0, out.ConsumedCapacity, nil)
	return out, nil
}

func (d *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := d.DynamoDBAPI.UpdateItem(ctx, in, o...)
	var c *types.ConsumedCapacity
	if err == nil {
		c = out.ConsumedCapacity
	}
	d.note(false, false, 0, 1, c, err)
	return out, err
}

func (d *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := d.DynamoDBAPI.PutItem(ctx, in, o...)
	var c *types.ConsumedCapacity
	if err == nil {
		c = out.ConsumedCapacity
	}
	d.note(false, false, 0, 1, c, err)
	return out, err
}

// capacity returns the read and write capacity units consumed so far.
func (d *countingDB) capacity() (rcu, wcu float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rcu, d.wcu
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

// TestLivenessStealNoticeStopsOldOwner checks that a worker a lease was
// stolen from learns it at its next renewal, by the thief's notice on its
// anchor, without a scan or a checkpoint of the shard; that the next
// renewal deletes the notice; and that a notice of a lease the worker took
// back since is ignored.
func TestLivenessStealNoticeStopsOldOwner(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	c1 := &countingDB{DynamoDBAPI: db}
	w1 := newWorker(t, table, "w1", c1, nil)
	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 })
	if err := w1.c.SyncShards(ctx, shardIDs(4)); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx) // the anchor is now w1's lease that changed last
	w2.cycle(ctx)        // sees w1 and watches its anchor; steals nothing
	anchor := w1.c.anchor
	var victim string
	for _, s := range w1.held() {
		if s != anchor {
			victim = s
			break
		}
	}
	w2.c.take(ctx, mustGet(t, w2.c.Table(), victim)) // a steal
	if got := w2.held(); len(got) != 1 || got[0] != victim {
		t.Fatalf("w2 holds %v, want [%s]", got, victim)
	}
	scans0, _, _, _ := c1.counts()
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 1 || lost[0] != victim {
		t.Fatalf("w1 lost %v at its next renewal, want [%s]", lost, victim)
	}
	if len(w1.held()) != 3 {
		t.Errorf("w1 holds %v, want the 3 others", w1.held())
	}
	if scans, _, _, _ := c1.counts(); scans != scans0 {
		t.Errorf("w1 scanned %d times to learn of the steal, want 0", scans-scans0)
	}
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: keyOf(anchor), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := out.Item[attrStolen]; ok {
		t.Errorf("the notice is still on the anchor after the renewal that acknowledged it: %v", n)
	}

	// A stale notice (a counter below the lease's) loses nothing.
	held := mustGet(t, w1.c.Table(), anchor)
	if ok, err := w1.c.Table().noteSteal(ctx, anchor, "w1", held.Shard, held.Counter-1); err != nil || !ok {
		t.Fatalf("noteSteal = %v, %v", ok, err)
	}
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 1 {
		t.Errorf("w1 lost %v after a stale notice, want only [%s] from before", lost, victim)
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
