package lease

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
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
	leasetable.DynamoDBAPI

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
// time: a live worker writes one beat per period whatever it holds (after
// its first beat, which renews each lease once); the other, without
// leases, reads the board once per period and never scans the table while
// nothing changes; once the first worker dies, its leases are taken at the
// first take cycle LeaseDuration after the observation of its last beat,
// after one confirming scan.
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
	w1.clk.Advance(period)
	w1.c.renewCycle(ctx) // the first beat, and a renewal of each lease
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
		t.Errorf("in %d periods: w1 wrote %d items (want %d), w2 scanned %d times (want 0) and read %d items (want %d)",
			periods, wrote-wrote0, periods, scans-scans0, gets-gets0, periods)
	}
	// w1 dies: its last beat was just observed by w2's last cycle.
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
		t.Errorf("taken %v after the observation of the last beat, want %v (the first cycle at least LeaseDuration %v later)", got, want, lease)
	}
	if len(w2.held()) != 4 {
		t.Errorf("w2 took %v, want all 4", w2.held())
	}
	if s, _, _, _ := c2.counts(); s != scans0+1 {
		t.Errorf("w2 scanned %d times to take over, want 1", s-scans0)
	}
}

// TestLivenessStolenLeaseLostAtCheckpoint checks that a worker without
// OnHandoff a lease was asked for (it learns of it at its next beat or
// scan) loses it at its next checkpoint of the shard, which writes
// nothing, and hands it off, so the thief takes it at its next take cycle.
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
	w2.cycle(ctx) // asks for one
	var stolen string
	for s, o := range owners(t, w2.c.Table()) {
		if o == "w2" {
			stolen = s
		}
	}
	if stolen == "" || len(w2.held()) != 0 || len(w1.held()) != 2 {
		t.Fatalf("w1 holds %v, w2 %v, w2 asked for %q; want w2 to have asked for one", w1.held(), w2.held(), stolen)
	}
	if err := w1.c.Commit(ctx, stolen, "100"); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Fatalf("w1's checkpoint of the stolen lease = %v, want ErrLeaseLost", err)
	}
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 1 || lost[0] != stolen {
		t.Errorf("w1 lost %v, want [%s]", lost, stolen)
	}
	w2.cycle(ctx)
	if got := w2.held(); len(got) != 1 || got[0] != stolen {
		t.Errorf("w2 holds %v after the hand-off, want [%s]", got, stolen)
	}
	if l := mustGet(t, w2.c.Table(), stolen); l.Owner != "w2" || l.Checkpoint == "100" || l.CheckpointOwner != "" {
		t.Errorf("stolen lease after the zombie checkpoint: %+v", l)
	}
}

// TestLivenessStealNoticeStopsOldOwner checks that a worker a lease was
// stolen from learns it at its next beat, by the thief's notice on the
// board, without a scan or a checkpoint of the shard; that the next beat
// deletes the notice; and that a notice of a lease the worker took back
// since is ignored.
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
	w1.c.renewCycle(ctx) // w1's first beat
	w2.cycle(ctx)        // sees w1's beat; steals nothing
	victim := w1.held()[2]
	w2.c.take(ctx, mustGet(t, w2.c.Table(), victim)) // a steal
	if got := w2.held(); len(got) != 1 || got[0] != victim {
		t.Fatalf("w2 holds %v, want [%s]", got, victim)
	}
	scans0, _, _, _ := c1.counts()
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 1 || lost[0] != victim {
		t.Fatalf("w1 lost %v at its next beat, want [%s]", lost, victim)
	}
	if len(w1.held()) != 3 {
		t.Errorf("w1 holds %v, want the 3 others", w1.held())
	}
	if scans, _, _, _ := c1.counts(); scans != scans0 {
		t.Errorf("w1 scanned %d times to learn of the steal, want 0", scans-scans0)
	}
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	board := boardItem(t, db, table, w1.c.board)
	if n, ok := board[noticeAttr("w1")]; ok {
		t.Errorf("the notice is still on the board after the beat that acknowledged it: %v", n)
	}

	// A stale notice (a counter below the lease's) loses nothing.
	held := mustGet(t, w1.c.Table(), w1.held()[0])
	if err := w1.c.Table().noteSteal(ctx, w1.c.board, "w1", held.Shard, held.Counter-1); err != nil {
		t.Fatalf("noteSteal: %v", err)
	}
	w1.clk.Advance(w1.c.cfg.RenewInterval)
	w1.c.renewCycle(ctx)
	w1.c.deliver()
	if _, lost := w1.events(); len(lost) != 1 {
		t.Errorf("w1 lost %v after a stale notice, want only [%s] from before", lost, victim)
	}
}

// boardItem reads the board's lease item as it is.
func boardItem(t *testing.T, db leasetable.DynamoDBAPI, table, board string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &table, Key: keyOf(board), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// TestLivenessBeatBoard checks the cost and the end of the default
// liveness with two workers that both hold leases: each writes one beat
// per period and reads nothing at all (its beat's answer shows the other's
// beat); when one dies, the other removes its beat and takes its leases at
// the first take cycle LeaseDuration after it saw the last beat, with one
// scan and no read; and beatForgetAfter later no trace of the dead worker
// is left on the board.
func TestLivenessBeatBoard(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	c1, c2 := &countingDB{DynamoDBAPI: db}, &countingDB{DynamoDBAPI: db}
	w1 := newWorker(t, table, "w1", c1, nil)
	w2 := newWorker(t, table, "w2", c2, nil)
	if err := w1.c.SyncShards(ctx, shardIDs(4)); err != nil {
		t.Fatal(err)
	}
	ws := []*worker{w1, w2}
	period := w1.c.cfg.RenewInterval
	step := func(ws ...*worker) { stepAll(ctx, ws...) }
	for range 4 {
		step(w1, w2)
	}
	if err := checkSpread(ws, 4); err != nil {
		t.Fatal(err)
	}
	step(w1, w2) // the first beats after the last take, and their renewals
	type counts struct{ scans, gets, wrote int }
	snap := func(c *countingDB) counts {
		s, g, _, w := c.counts()
		return counts{s, g, w}
	}
	a1, a2 := snap(c1), snap(c2)
	const periods = 6
	for range periods {
		step(w1, w2)
	}
	want := counts{0, 0, periods}
	for i, d := range []counts{snap(c1), snap(c2)} {
		a := []counts{a1, a2}[i]
		if got := (counts{d.scans - a.scans, d.gets - a.gets, d.wrote - a.wrote}); got != want {
			t.Errorf("w%d in %d periods: %+v, want %+v (one beat per period, no read)", i+1, periods, got, want)
		}
	}

	// w1 dies; w2 saw its last beat in its last cycle.
	a2 = snap(c2)
	var waited int
	for len(w2.held()) < 4 {
		step(w2)
		if waited++; waited > 10 {
			t.Fatalf("w1's leases never taken; w2 holds %v", w2.held())
		}
	}
	lease := w1.c.cfg.LeaseDuration
	if got, want := period*time.Duration(waited), (lease+period-1)/period*period; got != want {
		t.Errorf("taken %v after the observation of the last beat, want %v", got, want)
	}
	d := snap(c2)
	if d.scans-a2.scans != 1 || d.gets != a2.gets {
		t.Errorf("w2 scanned %d times and read %d items to take over, want 1 and 0", d.scans-a2.scans, d.gets-a2.gets)
	}
	if _, ok := boardItem(t, db, table, w2.c.board)[w1.c.beatName]; ok {
		t.Errorf("w1's beat %q is still on the board after the take-over", w1.c.beatName)
	}

	// w1's earlier notice attribute, if any, and every beat but w2's are
	// forgotten in time.
	if err := w2.c.Table().noteSteal(ctx, w2.c.board, "w1", "x", 1); err != nil {
		t.Fatal(err)
	}
	for range beatForgetAfter*3 + 1 {
		step(w2)
	}
	var left []string
	for name := range boardItem(t, db, table, w2.c.board) {
		if strings.HasPrefix(name, "weir") && strings.Contains(name, "w1") {
			left = append(left, name)
		}
	}
	if len(left) > 0 {
		t.Errorf("the dead worker's attributes are still on the board: %v", left)
	}
}

// TestLivenessSuspendedWorkerBeatRefused checks a worker suspended with its
// clock stopped (a suspended host) in the middle of a beat: the other
// worker takes it for dead, removes its beat and takes its leases; when it
// wakes, its beat lands but is refused, and it loses every lease before
// delivering more, though its clock says they are fresh, and starts a new
// incarnation.
func TestLivenessSuspendedWorkerBeatRefused(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 := newWorker(t, table, "w1", db, nil)
	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 })
	shards := shardIDs(3)
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	period := w1.c.cfg.RenewInterval
	w1.cycle(ctx)
	for range 2 { // the first beat, then one that vouches for the leases
		w1.clk.Advance(period)
		w1.c.renewCycle(ctx)
	}
	w2.cycle(ctx)

	old := w1.c.beatName
	resume := suspendMidBeat(ctx, w1) // its beat held in flight, its clock stopped

	for range 4 {
		w2.clk.Advance(period)
		w2.cycle(ctx)
	}
	if d := cmp.Diff(ids(shards), w2.held()); d != "" {
		t.Fatalf("w2 holds (-want +got):\n%s", d)
	}
	if !w1.c.Holds(shards[0].ID) {
		t.Fatal("w1's stopped clock should still vouch for its leases")
	}
	resume()
	w1.c.deliver()
	if _, lost := w1.events(); !cmp.Equal(ids(shards), lost) {
		t.Errorf("w1 lost %v after its refused beat, want %v", lost, ids(shards))
	}
	if w1.c.Holds(shards[0].ID) {
		t.Error("w1 still holds a lease after its refused beat")
	}
	if w1.c.beatName == old {
		t.Errorf("w1 keeps beating as %q after the refusal, want a new incarnation", old)
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

// TestLivenessBoardGone checks that a worker whose board item is deleted
// (a KCL's clean-up of a finished shard) keeps its other leases: its beat
// is refused, it renews each lease on its own, picks the next lease as the
// board at its next scan, and beats there.
func TestLivenessBoardGone(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "w", db, nil)
	shards := shardIDs(3)
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	period := w.c.cfg.RenewInterval
	step := func() {
		w.clk.Advance(period)
		w.cycle(ctx)
	}
	step()
	step()
	if w.c.board != shards[0].ID || w.c.myBeat == 0 {
		t.Fatalf("board %q, beat %d; want %s and a beat", w.c.board, w.c.myBeat, shards[0].ID)
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: keyOf(shards[0].ID)}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		step()
	}
	w.c.deliver()
	if _, lost := w.events(); !cmp.Equal(lost, []string{shards[0].ID}) {
		t.Errorf("lost %v, want only the deleted lease %s", lost, shards[0].ID)
	}
	for _, s := range shards[1:] {
		if !w.c.Holds(s.ID) {
			t.Errorf("shard %s not held after the board went", s.ID)
		}
	}
	if w.c.board != shards[1].ID {
		t.Errorf("board %q, want the next lease %s", w.c.board, shards[1].ID)
	}
	if _, ok := boardItem(t, db, table, shards[1].ID)[w.c.beatName]; !ok || w.c.myBeat < 2 {
		t.Errorf("no beat %q (at %d) on the new board", w.c.beatName, w.c.myBeat)
	}
	// Only beats vouch for the leases from now on: their counters stand still.
	before := mustGet(t, w.c.Table(), shards[2].ID).Counter
	step()
	if after := mustGet(t, w.c.Table(), shards[2].ID).Counter; after != before || !w.c.Holds(shards[2].ID) {
		t.Errorf("lease %s counter %d -> %d, held %v; want it vouched for by the beat alone", shards[2].ID, before, after, w.c.Holds(shards[2].ID))
	}
}

// disagreeingBoards returns two workers on a new table of n shards whose
// boards differ: w1 took shards 1 to n-1 and beats on shard 1, the
// smallest when it scanned; w2, which never steals, created shard 0's
// lease afterwards, took it and beats there.
func disagreeingBoards(t *testing.T, n int) (w1, w2 *worker, all []ShardInfo) {
	t.Helper()
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1 = newWorker(t, table, "w1", db, nil)
	w2 = newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { c.MaxStealsPerCycle = -1 })
	all = shardIDs(n)
	if err := w1.c.SyncShards(ctx, all[1:]); err != nil {
		t.Fatal(err)
	}
	period := w1.c.cfg.RenewInterval
	w1.cycle(ctx)
	for range 2 {
		w1.clk.Advance(period)
		w1.c.renewCycle(ctx)
	}
	if err := w2.c.SyncShards(ctx, all); err != nil { // creates the lease of shard 0
		t.Fatal(err)
	}
	for range 8 { // w2 takes shard 0 and beats there; w1 stays on shard 1
		w1.clk.Advance(period)
		w1.c.renewCycle(ctx)
		stepAll(ctx, w2)
	}
	if w1.c.board != all[1].ID || w2.c.board != all[0].ID || len(w1.held()) != n-1 {
		t.Fatalf("boards: w1 %q, w2 %q, want %s and %s; w1 holds %v", w1.c.board, w2.c.board, all[1].ID, all[0].ID, w1.held())
	}
	return w1, w2, all
}

// suspendMidBeat suspends w in the middle of a beat, as a suspended host:
// its clock advances to its next renew period and then stands still, and
// the beat's write is held in flight. resume lets the write through and
// returns once the renewal cycle is done.
func suspendMidBeat(ctx context.Context, w *worker) (resume func()) {
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.db.pause()
	done := make(chan struct{})
	go func() { defer close(done); w.c.renewCycle(ctx) }()
	<-w.db.blocked
	return func() {
		w.db.resume()
		<-done
	}
}

// stepAll advances each worker's clock by its renew period and runs one
// cycle of it, in turn.
func stepAll(ctx context.Context, ws ...*worker) {
	for _, w := range ws {
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.cycle(ctx)
	}
}

// TestLivenessBoardsDisagree checks two workers that picked different
// boards (a lease with a smaller key appeared after one of them scanned):
// each sees the other alive through its scans, and when the one beating on
// the other item is suspended with its clock stopped, the other removes
// its beat there before taking its leases, so that its next beat is
// refused and it loses them.
func TestLivenessBoardsDisagree(t *testing.T) {
	ctx := t.Context()
	w1, w2, all := disagreeingBoards(t, 3)
	period := w1.c.cfg.RenewInterval
	if got := w2.held(); !cmp.Equal(got, []string{all[0].ID}) {
		t.Fatalf("w2 holds %v while w1 beats on another board, want only %s", got, all[0].ID)
	}

	resume := suspendMidBeat(ctx, w1) // its beat held in flight, its clock stopped
	for i := 0; len(w2.held()) < 3; i++ {
		if i > 10 {
			t.Fatalf("w2 never took w1's leases; it holds %v", w2.held())
		}
		w2.clk.Advance(period)
		w2.cycle(ctx)
	}
	resume()
	w1.c.deliver()
	if _, lost := w1.events(); !cmp.Equal(ids(all[1:]), lost) {
		t.Errorf("w1 lost %v after its refused beat, want %v", lost, ids(all[1:]))
	}
}
