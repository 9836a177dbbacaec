package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws"
)

const testLease = 10 * time.Second

// gatedDB wraps a DynamoDB client: while paused, every call waits (the
// paused worker's calls are held, not lost) and its name is sent on blocked;
// with failWrites set, UpdateItem fails with a service error.
type gatedDB struct {
	leasetable.DynamoDBAPI
	blocked chan string

	mu         sync.Mutex
	gate       chan struct{} // nil: open
	failWrites bool
}

func newGatedDB(db leasetable.DynamoDBAPI) *gatedDB {
	return &gatedDB{DynamoDBAPI: db, blocked: make(chan string, 64)}
}

func (g *gatedDB) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
}

func (g *gatedDB) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gate)
	g.gate = nil
}

func (g *gatedDB) wait(ctx context.Context, op string) error {
	g.mu.Lock()
	gate, fail := g.gate, g.failWrites && op == "UpdateItem"
	g.mu.Unlock()
	if gate != nil {
		g.blocked <- op
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return &types.InternalServerError{Message: aws.String("injected")}
	}
	return nil
}

func (g *gatedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := g.wait(ctx, "UpdateItem"); err != nil {
		return nil, err
	}
	return g.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

func (g *gatedDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if err := g.wait(ctx, "Scan"); err != nil {
		return nil, err
	}
	return g.DynamoDBAPI.Scan(ctx, in, o...)
}

// worker is a Coordinator driven cycle by cycle by the test, on its own
// manual clock and client wrapper, recording its lease events.
type worker struct {
	c   *Coordinator
	clk *clock.Manual
	db  *gatedDB

	mu       sync.Mutex
	acquired []Lease
	lost     []string
}

func newWorker(t testing.TB, table, id string, db leasetable.DynamoDBAPI, tweak func(*CoordinatorConfig)) *worker {
	t.Helper()
	w := &worker{clk: clock.NewManual(time.Unix(1_700_000_000, 0)), db: newGatedDB(db)}
	cfg := CoordinatorConfig{
		Config: leasetable.Config{TableName: table, DynamoDB: w.db, WorkerID: id, LeaseDuration: testLease}, Clock: w.clk,
		Logger:     slog.New(slog.DiscardHandler),
		OnAcquired: func(l Lease) { w.mu.Lock(); w.acquired = append(w.acquired, l); w.mu.Unlock() },
		OnLost:     func(s string) { w.mu.Lock(); w.lost = append(w.lost, s); w.mu.Unlock() },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Ensure on the real clock: a new table's wait for ACTIVE must not hang
	// on the manual one.
	tbl, err := NewTable(TableConfig{Name: table, Client: db, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.c = c
	return w
}

// cycle runs one renew and one take cycle and delivers the events.
func (w *worker) cycle(ctx context.Context) {
	w.c.renewCycle(ctx)
	w.c.takeCycle(ctx)
	w.c.deliver()
}

func (w *worker) held() []string {
	var out []string
	for _, l := range w.c.Held() {
		out = append(out, l.Shard)
	}
	sort.Strings(out)
	return out
}

func (w *worker) events() (acquired, lost []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.acquired {
		acquired = append(acquired, l.Shard)
	}
	sort.Strings(acquired)
	lost = slices.Sorted(slices.Values(w.lost))
	return acquired, lost
}

func shardIDs(n int) []ShardInfo {
	var out []ShardInfo
	for i := range n {
		out = append(out, ShardInfo{ID: fmt.Sprintf("shardId-%012d", i)})
	}
	return out
}

func ids(shards []ShardInfo) []string {
	var out []string
	for _, s := range shards {
		out = append(out, s.ID)
	}
	return out
}

// owners reads the table: shard -> owner.
func owners(t *testing.T, tbl *Table) map[string]string {
	t.Helper()
	leases, err := tbl.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range leases {
		m[l.Shard] = l.Owner
	}
	return m
}

func TestCoordinatorConfig(t *testing.T) {
	_, err := NewCoordinator(CoordinatorConfig{
		Config:            leasetable.Config{TableName: "bad name!", WorkerID: " ", LeaseDuration: 3 * time.Second, RenewInterval: 5 * time.Second, TakeInterval: -time.Second},
		ShardSyncInterval: -time.Minute, InitialPosition: "AT_SEQUENCE_NUMBER",
	})
	if !errors.Is(err, leasetable.ErrInvalidConfig) {
		t.Fatalf("NewCoordinator = %v, want leasetable.ErrInvalidConfig", err)
	}
	for _, want := range []string{
		`table name "bad name!"`, "DynamoDB client is nil", `WorkerID " "`,
		"RenewInterval 5s: must be shorter than LeaseDuration 3s", "TakeInterval -1s", "ShardSyncInterval -1m0s", `InitialPosition "AT_SEQUENCE_NUMBER"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not report %q:\n%v", want, err)
		}
	}
	c, err := NewCoordinator(CoordinatorConfig{Config: leasetable.Config{TableName: "leases", DynamoDB: &dynamodb.Client{}, WorkerID: "w"}})
	if err != nil {
		t.Fatal(err)
	}
	got := [3]time.Duration{c.cfg.LeaseDuration, c.cfg.RenewInterval, c.cfg.TakeInterval}
	want := [3]time.Duration{10 * time.Second, 3333333333 * time.Nanosecond, 3333333334 * time.Nanosecond}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
}

// runFor drives workers that start together through every renew and take
// cycle their Run starts within d, on their own clocks, at the default
// periods: a take cycle at once and every TakeInterval, a renew cycle every
// RenewInterval (before a take due at the same time). Cycles due at the same
// time run concurrently when together is set, else in worker order. After
// each cycle, balanced (if not nil) is asked whether the workers' views are
// balanced; runFor returns when that first held (-1 if never) and the number
// of take cycles each worker ran.
func runFor(ctx context.Context, ws []*worker, d time.Duration, together bool, balanced func() bool) (first time.Duration, takes int) {
	type event struct {
		at   time.Duration
		take bool
	}
	cfg := ws[0].c.cfg
	var evs []event
	for at := time.Duration(0); at <= d; at += cfg.TakeInterval {
		evs = append(evs, event{at, true})
	}
	for at := cfg.RenewInterval; at <= d; at += cfg.RenewInterval {
		evs = append(evs, event{at, false})
	}
	sort.SliceStable(evs, func(i, j int) bool {
		return evs[i].at < evs[j].at || evs[i].at == evs[j].at && !evs[i].take && evs[j].take
	})
	start := make([]time.Time, len(ws))
	for i, w := range ws {
		start[i] = w.clk.Now()
	}
	first = -1
	for _, ev := range evs {
		run := func(i int, w *worker) {
			w.clk.Set(start[i].Add(ev.at))
			if ev.take {
				w.c.takeCycle(ctx)
			} else {
				w.c.renewCycle(ctx)
			}
			w.c.deliver()
		}
		var wg sync.WaitGroup
		for i, w := range ws {
			if together {
				wg.Go(func() { run(i, w) })
			} else {
				run(i, w)
			}
		}
		wg.Wait()
		if ev.take {
			takes++
		}
		if first < 0 && balanced != nil && balanced() {
			first = ev.at
		}
	}
	return first, takes
}

// TestCoordinatorConverges checks the bound with default settings:
// 3 workers starting together on 8 unowned shards each hold 2 or 3 of them
// within two lease durations, in virtual time. "One first" is a worker
// that scans first and takes every lease, the others stealing one lease per
// cycle; "together" has the first takes race (random winners) and two
// workers steal from the same one at once (sometimes the same lease).
func TestCoordinatorConverges(t *testing.T) {
	for _, tc := range []struct {
		name     string
		together bool
		every    bool // RenewEveryLease
	}{{"one first", false, false}, {"together", true, false}, {"one first, every lease", false, true}, {"together, every lease", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ws := defaultFleet(t, 3, 8, func(c *CoordinatorConfig) { c.RenewEveryLease = tc.every })
			lease := ws[0].c.cfg.LeaseDuration
			balanced := func() bool { return checkSpread(ws, 8) == nil }
			first, takes := runFor(ctx, ws, 2*lease, tc.together, balanced)
			t.Logf("%d take cycles in %v; balanced after %v (%.2f lease durations)",
				takes, 2*lease, first, first.Seconds()/lease.Seconds())
			if err := checkSpread(ws, 8); err != nil {
				t.Errorf("after %v: %v", 2*lease, err)
			}
			if !tc.every {
				// A worker a lease was stolen from learns it at its next
				// scan (or checkpoint of the shard); one more scan each.
				for _, w := range ws {
					w.c.scanCycle(ctx)
					w.c.deliver()
				}
			}
			all := map[string]string{}
			for _, w := range ws {
				for _, s := range w.held() {
					all[s] = w.c.WorkerID()
				}
			}
			if d := cmp.Diff(all, owners(t, ws[0].c.Table())); d != "" {
				t.Errorf("held leases vs table owners (-held +table):\n%s", d)
			}
			// Every loss a worker suffered (stolen leases) was reported.
			for _, w := range ws {
				acquired, lost := w.events()
				if len(acquired)-len(lost) != len(w.held()) {
					t.Errorf("%s: %d acquired - %d lost != %d held", w.c.WorkerID(), len(acquired), len(lost), len(w.held()))
				}
			}
		})
	}
}

// checkSpread reports why the workers' held leases are not n leases spread
// evenly, each held once, or nil.
//
// The spread is the table's: without RenewEveryLease, a worker a lease was
// stolen from learns it at its next checkpoint of the shard or its next
// scan, and may believe it holds it meanwhile.
func checkSpread(ws []*worker, n int) error {
	leases, _, err := ws[0].c.Table().ListAll(context.Background())
	if err != nil {
		return err
	}
	per := map[string]int{}
	holder := map[string]string{}
	for _, l := range leases {
		if l.Owner != "" {
			per[l.Owner]++
			holder[l.Shard] = l.Owner
		}
	}
	counts := make([]int, 0, len(ws))
	for _, w := range ws {
		counts = append(counts, per[w.c.WorkerID()])
	}
	lo, hi := n/len(ws), (n+len(ws)-1)/len(ws)
	for _, c := range counts {
		if c < lo || c > hi {
			return fmt.Errorf("leases per worker %v, want each %d to %d", counts, lo, hi)
		}
	}
	if len(holder) != n {
		return fmt.Errorf("%d leases held, want %d", len(holder), n)
	}
	return nil
}

func TestCoordinatorExpiredLeasesTaken(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	shards := shardIDs(4)
	w1 := newWorker(t, table, "w1", db, nil)
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	if d := cmp.Diff(ids(shards), w1.held()); d != "" {
		t.Fatalf("w1 alone holds (-want +got):\n%s", d)
	}
	if err := w1.c.Commit(ctx, shards[0].ID, "4242"); err != nil {
		t.Fatal(err)
	}
	// w1 stops without cleanup. w2 starts, may steal its share at once,
	// and takes the rest once it has seen them unchanged for a lease
	// duration.
	w2 := newWorker(t, table, "w2", db, nil)
	w2.cycle(ctx)
	if n := len(w2.held()); n > len(shards)/2 {
		t.Fatalf("w2 took %d leases of a live-looking worker at once, want at most %d (its share, stolen)", n, len(shards)/2)
	}
	w2.clk.Advance(testLease)
	w2.cycle(ctx)
	if d := cmp.Diff(ids(shards), w2.held()); d != "" {
		t.Fatalf("w2 after expiry holds (-want +got):\n%s", d)
	}
	for _, l := range w2.c.Held() {
		want := checkpointer.LatestPosition
		if l.Shard == shards[0].ID {
			want = "4242"
		}
		if l.Checkpoint != want || l.OwnerSwitches != 1 {
			t.Errorf("w2's lease %s: checkpoint %q, switches %d; want %q, 1", l.Shard, l.Checkpoint, l.OwnerSwitches, want)
		}
	}
}

// TestCoordinatorTakeOverAfterLastRenewal checks, in virtual time and with
// default settings, when a dead worker's leases are taken: at the first scan
// at least LeaseDuration after the first scan that saw its last renewal. A
// survivor scanning every TakeInterval (T) that divides LeaseDuration (L)
// takes them after more than L and at most L + T from that renewal: L + T
// when the renewal lands just after a scan (the next scan is the first to
// see it), ceil(L/T)*T = L when just before. Never less than L.
func TestCoordinatorTakeOverAfterLastRenewal(t *testing.T) {
	type scan struct {
		after time.Duration // since the last renewal, on the survivor's clock
		held  int           // leases the survivor holds after it: 2 while after < L
	}
	cfg := CoordinatorConfig{}
	cfg.setDefaults()
	lease, take := cfg.LeaseDuration, cfg.TakeInterval
	bound := (lease+take-1)/take*take + take // ceil(L/T)*T + T
	if bound > lease+take+2 {                // 2ns: the default T is L/3 rounded up
		t.Fatalf("bound %v for LeaseDuration %v, TakeInterval %v: want LeaseDuration + TakeInterval", bound, lease, take)
	}
	tests := []struct {
		name       string
		scanBefore bool // the survivor scans just before the last renewal, else just after
		scans      []scan
	}{
		{
			name: "renewed just after a scan", scanBefore: true,
			scans: []scan{{take, 2}, {2 * take, 2}, {3 * take, 2}, {bound, 4}},
		},
		{
			name: "renewed just before a scan",
			// 3T >= L: expired at the third scan after the one that saw it.
			scans: []scan{{0, 2}, {take, 2}, {2 * take, 2}, {lease - 1, 2}, {3 * take, 4}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			db := servers.Env(t).DynamoDB()
			table := localaws.UniqueName(t)
			defaults := func(c *CoordinatorConfig) { c.LeaseDuration = 0 }
			w1 := newWorker(t, table, "w1", db, defaults)
			w2 := newWorker(t, table, "w2", db, defaults)
			if err := w1.c.SyncShards(ctx, shardIDs(4)); err != nil {
				t.Fatal(err)
			}
			ws := []*worker{w1, w2}
			runFor(ctx, ws, 2*lease, false, nil)
			if err := checkSpread(ws, 4); err != nil {
				t.Fatalf("before the death: %v", err)
			}
			// w1's last writes: a checkpoint, then a renewal of every lease.
			if tc.scanBefore {
				w2.c.takeCycle(ctx)
			}
			var last string
			for s, o := range owners(t, w1.c.Table()) {
				if o == "w1" && (last == "" || s < last) {
					last = s
				}
			}
			if err := w1.c.Commit(ctx, last, "4242"); err != nil {
				t.Fatal(err)
			}
			w1.c.renewCycle(ctx)
			renewed := w2.clk.Now()
			for _, sc := range tc.scans {
				w2.clk.Set(renewed.Add(sc.after))
				w2.cycle(ctx)
				if n := len(w2.held()); n != sc.held {
					t.Fatalf("%v after w1's last renewal: w2 holds %d leases, want %d", sc.after, n, sc.held)
				}
			}
			if d := cmp.Diff(ids(shardIDs(4)), w2.held()); d != "" {
				t.Errorf("w2 holds (-want +got):\n%s", d)
			}
			if l := mustGet(t, w2.c.Table(), last); l.Checkpoint != "4242" || l.Owner != "w2" {
				t.Errorf("lease %s after the take-over: %+v, want w2's, checkpoint 4242", last, l)
			}
		})
	}
}

func TestCoordinatorPausedWorkerLosesLeases(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	shards := shardIDs(3)
	w1 := newWorker(t, table, "w1", db, nil)
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	if err := w1.c.Commit(ctx, shards[0].ID, "100"); err != nil {
		t.Fatal(err)
	}

	// w1 pauses (a long GC pause, a frozen VM): its clock stands still and
	// its calls are held in flight.
	w1.db.pause()
	var wg sync.WaitGroup
	commitErr := make(chan error, 1)
	wg.Go(func() { w1.c.renewCycle(ctx) })
	wg.Go(func() { commitErr <- w1.c.Commit(ctx, shards[1].ID, "150") })
	<-w1.db.blocked // at least one call is held

	w2 := newWorker(t, table, "w2", db, nil)
	w2.cycle(ctx)
	w2.clk.Advance(testLease)
	w2.cycle(ctx)
	if d := cmp.Diff(ids(shards), w2.held()); d != "" {
		t.Fatalf("w2 holds (-want +got):\n%s", d)
	}
	if err := w2.c.Commit(ctx, shards[0].ID, "200"); err != nil {
		t.Fatal(err)
	}

	w1.db.resume()
	wg.Wait()
	if err := <-commitErr; !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("paused worker's checkpoint = %v, want ErrLeaseLost", err)
	}
	w1.c.deliver()
	_, lost := w1.events()
	if d := cmp.Diff(ids(shards), lost); d != "" {
		t.Errorf("w1 reported lost (-want +got):\n%s", d)
	}
	if err := w1.c.Commit(ctx, shards[0].ID, "300"); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("checkpoint after the loss = %v, want ErrLeaseLost", err)
	}
	l := mustGet(t, w2.c.Table(), shards[0].ID)
	if l.Checkpoint != "200" || l.Owner != "w2" {
		t.Errorf("lease after the zombie's writes: %+v, want w2's checkpoint 200", l)
	}
	if n := len(w1.held()); n != 0 {
		t.Errorf("w1 still holds %d leases", n)
	}
}

func TestCoordinatorRenewFailuresExpire(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	w := newWorker(t, localaws.UniqueName(t), "w", db, nil)
	shards := shardIDs(2)
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w.cycle(ctx)
	w.db.mu.Lock()
	w.db.failWrites = true
	w.db.mu.Unlock()
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	w.c.deliver()
	if _, lost := w.events(); len(lost) != 0 || len(w.held()) != 2 {
		t.Fatalf("after one failed renewal: held %v, lost %v; want both held", w.held(), lost)
	}
	w.clk.Advance(testLease - w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	w.c.deliver()
	if _, lost := w.events(); !cmp.Equal(ids(shards), lost) {
		t.Errorf("after a lease duration without renewal: lost %v, want %v", lost, ids(shards))
	}
}

func TestCoordinatorParentsFirst(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w := newWorker(t, table, "w", db, nil) // InitialPosition defaults to LATEST
	shards := []ShardInfo{
		{ID: "parent"}, {ID: "child-1", ParentIDs: []string{"parent"}},
		{ID: "child-2", ParentIDs: []string{"parent"}}, {ID: "orphan", ParentIDs: []string{"expired-parent"}},
	}
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	start := map[string]string{}
	for _, l := range w.c.Held() {
		start[l.Shard] = l.Checkpoint
	}
	leases, err := w.c.Table().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		start[l.Shard] = l.Checkpoint
	}
	wantStart := map[string]string{"parent": checkpointer.LatestPosition, "child-1": checkpointer.TrimHorizon, "child-2": checkpointer.TrimHorizon, "orphan": checkpointer.LatestPosition}
	if d := cmp.Diff(wantStart, start); d != "" {
		t.Errorf("initial checkpoints (-want +got):\n%s", d)
	}
	w.cycle(ctx)
	if d := cmp.Diff([]string{"orphan", "parent"}, w.held()); d != "" {
		t.Fatalf("before the parent ends, held (-want +got):\n%s", d)
	}
	w.cycle(ctx)
	if d := cmp.Diff([]string{"orphan", "parent"}, w.held()); d != "" {
		t.Fatalf("children taken before the parent ended (-want +got):\n%s", d)
	}
	if err := w.c.Commit(ctx, "parent", checkpointer.ShardEnd); err != nil {
		t.Fatal(err)
	}
	if l := mustGet(t, w.c.Table(), "parent"); l.Checkpoint != checkpointer.ShardEnd || l.Owner != "" {
		t.Errorf("finished parent lease %+v, want SHARD_END and released", l)
	}
	w.cycle(ctx)
	if d := cmp.Diff([]string{"child-1", "child-2", "orphan"}, w.held()); d != "" {
		t.Errorf("after the parent ended, held (-want +got):\n%s", d)
	}
}

// runWorker starts Run of a new worker id on table, whose ListShards
// lists shards shards, and returns it, a channel of the shards it
// acquires, and one of Run's error.
func runWorker(t *testing.T, db leasetable.DynamoDBAPI, table, id string, shards int) (*worker, <-chan string, <-chan error) {
	t.Helper()
	acquired := make(chan string, 16)
	w := newWorker(t, table, id, db, func(c *CoordinatorConfig) {
		c.OnAcquired = func(l Lease) { acquired <- l.Shard }
		c.ListShards = func(context.Context) ([]ShardInfo, error) { return shardIDs(shards), nil }
	})
	runErr := make(chan error, 1)
	go func() { runErr <- w.c.Run(t.Context()) }()
	return w, acquired, runErr
}

func TestCoordinatorRunAndDrain(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	w1, acquired, runErr := runWorker(t, db, table, "w1", 3)
	var got []string
	deadline := time.After(time.Minute) // a bound on a condition wait, not a timing assertion
	for len(got) < 3 {
		select {
		case s := <-acquired:
			got = append(got, s)
		case err := <-runErr:
			t.Fatalf("Run returned early: %v", err)
		case <-deadline:
			t.Fatalf("acquired only %v", got)
		}
	}
	if err := w1.c.Commit(ctx, got[0], "77"); err != nil {
		t.Fatal(err)
	}
	if err := w1.c.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Errorf("Run after Drain = %v, want nil", err)
	}
	for shard, owner := range owners(t, w1.c.Table()) {
		if owner != "" {
			t.Errorf("after Drain, %s is owned by %q", shard, owner)
		}
	}
	// Given up on purpose, each once: a metrics sampler does not count
	// them as lost.
	want := map[string]int64{}
	for _, s := range got {
		want[s] = 1
	}
	if d := cmp.Diff(want, w1.c.Given()); d != "" {
		t.Errorf("Given after Drain (-want +got):\n%s", d)
	}
	if err := w1.c.Commit(ctx, got[0], "78"); !errors.Is(err, checkpointer.ErrLeaseLost) {
		t.Errorf("Commit after Drain = %v, want ErrLeaseLost", err)
	}
	// Another worker takes the released leases at once, checkpoint included.
	w2 := newWorker(t, table, "w2", db, nil)
	w2.cycle(ctx)
	if d := cmp.Diff(ids(shardIDs(3)), w2.held()); d != "" {
		t.Errorf("w2 after w1's drain holds (-want +got):\n%s", d)
	}
	if l := mustGet(t, w2.c.Table(), got[0]); l.Checkpoint != "77" {
		t.Errorf("drained lease checkpoint %q, want 77", l.Checkpoint)
	}
}
