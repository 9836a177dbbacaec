package lease

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/internal/localaws"
)

// fleetClock drives workers on their own manual clocks, together, at the
// default periods, one take period at a time: each step advances every
// clock by TakeInterval and runs a renew cycle, a shard sync (every
// ShardSyncInterval, with shards) and a take cycle on each worker, in
// worker order.
type fleetClock struct {
	ws       []*worker
	gets     []*getLog // each worker's reads of one item, if logged
	shards   []ShardInfo
	elapsed  time.Duration
	lastSync time.Duration
}

// step runs one take period of every worker.
func (f *fleetClock) step(ctx context.Context, t *testing.T) {
	t.Helper()
	cfg := f.ws[0].c.cfg
	f.elapsed += cfg.TakeInterval
	sync := f.elapsed-f.lastSync >= cfg.ShardSyncInterval
	if sync {
		f.lastSync = f.elapsed
	}
	for _, w := range f.ws {
		w.clk.Advance(cfg.TakeInterval)
		w.c.renewCycle(ctx)
		if sync {
			if err := w.c.SyncShards(ctx, f.shards); err != nil {
				t.Fatal(err)
			}
		}
		w.c.takeCycle(ctx)
		w.c.deliver()
	}
}

// splitFleet returns three workers at the default periods on a new table
// of seven shards, one of them (parent) split into two children listed in
// the returned fleet's shards: w0 holds the parent and two more, w1 and w2
// two each, and the children's leases exist, unowned, while the parent is
// read. With seen, every worker has seen them (a shard sync) and has
// nothing left to take; else only w0 has, and the others' next shard sync
// is ShardSyncInterval/2 away.
func splitFleet(t *testing.T, seen bool) (f *fleetClock, parent ShardInfo, children []ShardInfo) {
	t.Helper()
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	f = &fleetClock{}
	for i := range 3 {
		gets := &getLog{DynamoDBAPI: db}
		f.gets = append(f.gets, gets)
		f.ws = append(f.ws, newWorker(t, table, fmt.Sprintf("worker-%d", i), gets, func(c *CoordinatorConfig) {
			c.LeaseDuration = 0 // every period at its default
		}))
	}
	parent, children = reshardedShards()
	others := shardIDs(9)[3:] // shardId-...3 to 8: after the parent and its children
	// w1 and w2 take two shards each, then w0 the parent and two more:
	// 3, 2, 2, balanced (no steal).
	for i, set := range [][]ShardInfo{others[:2], others[2:4], append([]ShardInfo{parent}, others[4:]...)} {
		w := f.ws[(i+1)%3]
		f.shards = append(f.shards, set...)
		if err := w.c.SyncShards(ctx, f.shards); err != nil {
			t.Fatal(err)
		}
		w.c.scanCycle(ctx)
		w.c.deliver()
	}
	for i, want := range []int{3, 2, 2} {
		if got := f.ws[i].held(); len(got) != want {
			t.Fatalf("set-up: %s holds %v, want %d leases", f.ws[i].c.WorkerID(), got, want)
		}
	}
	if !f.ws[0].c.Holds(parent.ID) {
		t.Fatalf("set-up: worker-0 holds %v, want the parent %s among them", f.ws[0].held(), parent.ID)
	}
	cfg := f.ws[0].c.cfg
	settle := func() { // a scan asked for (a take planned) is done
		for range 3 {
			f.step(ctx, t)
		}
	}
	settle()
	// The split: the next shard sync of each worker lists the children.
	f.shards = append(f.shards, children...)
	if seen {
		f.lastSync = f.elapsed - cfg.ShardSyncInterval
		settle()
	} else {
		if err := f.ws[0].c.SyncShards(ctx, f.shards); err != nil {
			t.Fatal(err)
		}
		f.ws[0].c.takeCycle(ctx)
		f.lastSync = f.elapsed - cfg.ShardSyncInterval/2
	}
	for _, c := range children {
		if o := owners(t, f.ws[0].c.Table())[c.ID]; o != "" {
			t.Fatalf("set-up: child %s owned by %s while its parent is read", c.ID, o)
		}
	}
	return f, parent, children
}

// TestCoordinatorChildTakenAfterParentEnds splits the parent shard of a
// worker whose balance target is full (3 leases of 8 once the parent
// ends, the target is 3), ends the parent, and checks that the child its
// owner leaves (it takes one, up to its target) is taken by another
// worker within two take cycles, or two take cycles after its next shard
// sync if it had not seen the children's leases before the parent ended.
// Before the fix only the parent's owner scanned when the parent ended:
// the other workers, whose shard syncs read the children's leases (waiting,
// or free), left the second child unowned until their periodic scan
// (ScanInterval, 10 minutes), unread.
func TestCoordinatorChildTakenAfterParentEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		seen bool // the children's leases, waiting, by every worker
	}{{"children seen waiting", true}, {"children first seen free", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			f, parent, children := splitFleet(t, tc.seen)
			if tc.seen {
				// While the parent is read, worker-1 and worker-2, below
				// their target, read its lease every take cycle; worker-0,
				// which reads it, reads nothing.
				for _, g := range f.gets {
					g.take()
				}
				const cycles = 3
				for range cycles {
					f.step(ctx, t)
				}
				for i, g := range f.gets {
					want := slices.Repeat([]string{parent.ID}, cycles)
					if i == 0 {
						want = nil
					}
					if diff := cmp.Diff(want, g.take()); diff != "" {
						t.Errorf("worker-%d's reads of one item in %d take cycles (-want +got):\n%s", i, cycles, diff)
					}
				}
			}
			if err := f.ws[0].c.Commit(ctx, parent.ID, checkpointer.ShardEnd); err != nil {
				t.Fatal(err)
			}
			f.ws[0].c.deliver()
			cfg := f.ws[0].c.cfg
			bound := 2 * cfg.TakeInterval
			if !tc.seen {
				bound += f.lastSync + cfg.ShardSyncInterval - f.elapsed
			}
			start := f.elapsed
			taken := func() bool {
				o := owners(t, f.ws[0].c.Table())
				return o[children[0].ID] != "" && o[children[1].ID] != ""
			}
			for !taken() && f.elapsed-start <= cfg.ScanInterval+cfg.TakeInterval {
				f.step(ctx, t)
			}
			took := f.elapsed - start
			if !taken() || took > bound {
				t.Fatalf("both children owned after %v (%v), want within %v; owners %v",
					took, taken(), bound, owners(t, f.ws[0].c.Table()))
			}
			t.Logf("both children owned after %v", took)
			// worker-0 a child and its two others; worker-1 or worker-2 the other.
			if got := f.ws[0].held(); len(got) != 3 {
				t.Errorf("worker-0 holds %v, want its two other shards and a child", got)
			}
			if n := len(f.ws[1].held()) + len(f.ws[2].held()); n != 5 {
				t.Errorf("worker-1 and worker-2 hold %v and %v, want 5 leases between them", f.ws[1].held(), f.ws[2].held())
			}
		})
	}
}

// TestCoordinatorParentReadRefusedWarns has the workers waiting for a
// parent's children read the parent's lease under a policy that refuses
// GetItem, and checks that each says so once, at WARN, naming the fix,
// and again only after a read succeeded in between; the children are
// still taken, by the periodic scan.
func TestCoordinatorParentReadRefusedWarns(t *testing.T) {
	ctx := t.Context()
	f, parent, children := splitFleet(t, true)
	logs := make([]*bytes.Buffer, len(f.ws))
	for i, w := range f.ws {
		logs[i] = &bytes.Buffer{}
		w.c.log = slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	const refused = "reading a parent shard's lease was refused"
	warnings := func(i int) int { return strings.Count(logs[i].String(), refused) }
	for _, g := range f.gets {
		g.setRefuse(true)
		g.take()
	}
	for range 3 {
		f.step(ctx, t)
	}
	for i, g := range f.gets {
		reads, want := len(g.take()), 1
		if i == 0 { // it reads the parent: it waits for nothing
			want = 0
		}
		if reads == 0 && want > 0 {
			t.Fatalf("worker-%d read no parent lease in 3 take cycles; the test needs it to", i)
		}
		if got := warnings(i); got != want {
			t.Errorf("worker-%d warned %d times in 3 refused take cycles, want %d; log:\n%s", i, got, want, logs[i])
		}
	}
	if log := logs[1].String(); !strings.Contains(log, "fix: allow dynamodb:GetItem on the lease table") || !strings.Contains(log, "shard="+parent.ID) {
		t.Errorf("worker-1's warning names neither the fix nor the parent:\n%s", log)
	}
	// A read that succeeds ends the episode: the next refusal is said again.
	f.gets[1].setRefuse(false)
	f.step(ctx, t)
	f.gets[1].setRefuse(true)
	f.step(ctx, t)
	if got := warnings(1); got != 2 {
		t.Errorf("worker-1 warned %d times after a read succeeded between refusals, want 2; log:\n%s", got, logs[1])
	}
	// The parent ends; nobody can read that, but the periodic scan shows it.
	if err := f.ws[0].c.Commit(ctx, parent.ID, checkpointer.ShardEnd); err != nil {
		t.Fatal(err)
	}
	f.ws[0].c.deliver()
	cfg := f.ws[0].c.cfg
	taken := func() bool {
		o := owners(t, f.ws[0].c.Table())
		return o[children[0].ID] != "" && o[children[1].ID] != ""
	}
	for start := f.elapsed; !taken() && f.elapsed-start <= 2*cfg.ScanInterval; {
		f.step(ctx, t)
	}
	if !taken() {
		t.Fatalf("children not both owned after two scan intervals of refused parent reads: owners %v", owners(t, f.ws[0].c.Table()))
	}
}

// getLog logs the keys of the items a DynamoDB client reads one at a time
// (GetItem).
type getLog struct {
	leasetable.DynamoDBAPI

	mu     sync.Mutex
	keys   []string
	refuse bool // answer every GetItem as a policy without it would
}

// errGetDenied is how DynamoDB refuses a GetItem the caller's policy does
// not allow.
var errGetDenied = &smithy.GenericAPIError{Code: "AccessDeniedException",
	Message: "User: arn:aws:iam::123456789012:user/weir is not authorized to perform: dynamodb:GetItem", Fault: smithy.FaultClient}

func (g *getLog) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	g.mu.Lock()
	if k, ok := in.Key["leaseKey"].(*types.AttributeValueMemberS); ok {
		g.keys = append(g.keys, k.Value)
	}
	refuse := g.refuse
	g.mu.Unlock()
	if refuse {
		return nil, errGetDenied
	}
	return g.DynamoDBAPI.GetItem(ctx, in, o...)
}

// setRefuse sets whether g refuses GetItems.
func (g *getLog) setRefuse(refuse bool) {
	g.mu.Lock()
	g.refuse = refuse
	g.mu.Unlock()
}

// take returns the keys read since the last take.
func (g *getLog) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := g.keys
	g.keys = nil
	return keys
}

// TestCoordinatorParentReadsBounded has a worker holding one lease (and
// stealing none) wait for the children of three parents another worker reads, and
// checks that it reads at most maxParentPeeks of the parents' leases per
// take cycle, each in turn, and scans as soon as it reads one ended,
// taking its child (which the parent's owner, above its target, leaves).
func TestCoordinatorParentReadsBounded(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	// Parents 1 to 3 with a child each (4 to 6), and three more shards,
	// 0 (the beat board, which w2 reads every take cycle) and 7, 8.
	var parents, children []ShardInfo
	for i := 1; i <= 3; i++ {
		p := fmt.Sprintf("shardId-%012d", i)
		parents = append(parents, ShardInfo{ID: p})
		children = append(children, ShardInfo{ID: fmt.Sprintf("shardId-%012d", i+3), ParentIDs: []string{p}})
	}
	all := shardIDs(9)
	shards := slices.Concat([]ShardInfo{all[0]}, parents, children, all[7:])
	w1 := newWorker(t, table, "w1", db, func(c *CoordinatorConfig) { c.LeaseDuration = 0 })
	gets := &getLog{DynamoDBAPI: db}
	w2 := newWorker(t, table, "w2", gets, func(c *CoordinatorConfig) {
		c.LeaseDuration = 0
		c.MaxStealsPerCycle = -1 // the parents stay w1's
	})
	f := &fleetClock{ws: []*worker{w1, w2}, shards: shards}
	// w1 takes every shard but the children and 8, then w2 takes 8.
	for i, w := range f.ws {
		if err := w.c.SyncShards(ctx, shards[:len(shards)-1+i]); err != nil {
			t.Fatal(err)
		}
		w.c.scanCycle(ctx)
		w.c.deliver()
	}
	if got := w1.held(); len(got) != 5 {
		t.Fatalf("w1 holds %v, want every shard but the children and %s", got, all[8].ID)
	}
	for range 3 {
		f.step(ctx, t) // w2's first shard sync and scan, then nothing to take
	}
	gets.take()
	read := map[string]int{}
	const cycles = 3
	for range cycles {
		f.step(ctx, t)
		var n int
		for _, k := range gets.take() {
			if slices.ContainsFunc(parents, func(p ShardInfo) bool { return p.ID == k }) {
				read[k]++
				n++
			}
		}
		if n > 2 {
			t.Errorf("w2 read %d parents' leases in a take cycle, want at most 2 (maxParentPeeks)", n)
		}
	}
	if len(read) != 3 {
		t.Errorf("w2 read the leases of parents %v in %d take cycles, want all three", read, cycles)
	}
	if got := w2.held(); !slices.Equal(got, []string{all[8].ID}) {
		t.Fatalf("w2 holds %v while the parents are read, want %s", got, all[8].ID)
	}
	if err := w1.c.Commit(ctx, parents[1].ID, checkpointer.ShardEnd); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		f.step(ctx, t)
	}
	if got := w2.held(); !slices.Equal(got, []string{children[1].ID, all[8].ID}) {
		t.Errorf("w2 holds %v two take cycles after the parent %s ended, want its child %s", got, parents[1].ID, children[1].ID)
	}
}

// TestCoordinatorUnownedLeaseWarned leaves a lease that can be taken
// unowned (the only worker at MaxLeases) and checks that one WARN names it
// and MaxLeases, once, at the take cycle that reads it still unowned
// unownedWarnAfter (two lease durations) after a scan first showed it so,
// without waiting for the periodic scan, and again only after it was
// owned and free again (a new episode).
func TestCoordinatorUnownedLeaseWarned(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	var logs bytes.Buffer
	w := newWorker(t, table, "w1", db, func(c *CoordinatorConfig) {
		c.LeaseDuration = 0 // every period at its default
		c.MaxLeases = 1
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	f := &fleetClock{ws: []*worker{w}, shards: shardIDs(2)}
	if err := w.c.SyncShards(ctx, f.shards); err != nil {
		t.Fatal(err)
	}
	cfg := w.c.cfg
	stepFor := func(d time.Duration) {
		for end := f.elapsed + d; f.elapsed < end; {
			f.step(ctx, t)
		}
	}
	warned := func() int { return strings.Count(logs.String(), "stayed unowned") }
	f.step(ctx, t) // the first scan: one lease taken, the other seen unowned
	free := f.shards[0].ID
	if w.c.Holds(free) {
		free = f.shards[1].ID
	}
	stepFor(w.c.unownedWarnAfter() - 2*cfg.TakeInterval)
	if n := warned(); n != 0 {
		t.Fatalf("%d warnings before the lease was free for %v:\n%s", n, w.c.unownedWarnAfter(), logs.String())
	}
	stepFor(3 * cfg.TakeInterval)
	if n := warned(); n != 1 || !strings.Contains(logs.String(), free) || !strings.Contains(logs.String(), "MaxLeases") {
		t.Fatalf("%v after the lease was first seen free: %d warnings, want one naming %s and MaxLeases:\n%s", w.c.unownedWarnAfter()+cfg.TakeInterval, n, free, logs.String())
	}
	stepFor(2 * cfg.ScanInterval)
	if n := warned(); n != 1 {
		t.Fatalf("%d warnings for one episode, want 1:\n%s", n, logs.String())
	}
	// Another worker takes it (a scan of w1 sees it owned), then lets it
	// go: a new episode.
	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { c.MaxLeases = 1 })
	w2.c.scanCycle(ctx)
	w2.c.deliver()
	held := w2.c.Held()
	if len(held) != 1 || held[0].Shard != free {
		t.Fatalf("w2 holds %v, want %s", held, free)
	}
	w.c.scanCycle(ctx)
	if _, err := w2.c.Table().Release(ctx, held[0]); err != nil {
		t.Fatal(err)
	}
	w.c.scanCycle(ctx)
	stepFor(w.c.unownedWarnAfter() + 2*cfg.TakeInterval)
	if n := warned(); n != 2 {
		t.Fatalf("%d warnings after a second episode, want 2:\n%s", n, logs.String())
	}
}

// TestCoordinatorLeaseLeftFreeWarned has w0, at its target with the
// default settings, scan a free lease that w1, below its target, never
// takes: w1 beats but runs no take cycle, as a worker that missed what
// should have had it scan. w0 must say so at WARN within a take cycle of
// unownedWarnAfter, reading the lease again rather than waiting for its
// periodic scan (ScanInterval, 10 minutes), and not before.
func TestCoordinatorLeaseLeftFreeWarned(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	var logs bytes.Buffer
	w0 := newWorker(t, table, "w0", db, func(c *CoordinatorConfig) {
		c.LeaseDuration = 0 // every setting at its default
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	w1 := newWorker(t, table, "w1", db, func(c *CoordinatorConfig) { c.LeaseDuration = 0 })
	shards := shardIDs(4)
	if err := w0.c.SyncShards(ctx, shards[:3]); err != nil {
		t.Fatal(err)
	}
	cfg := w0.c.cfg
	w0.cycle(ctx) // takes all three
	w1.cycle(ctx) // asks for one
	w0.clk.Advance(cfg.RenewInterval)
	w0.cycle(ctx) // hands it off (no OnHandoff)
	w1.clk.Advance(cfg.TakeInterval)
	w1.cycle(ctx) // takes it
	if len(w0.held()) != 2 || len(w1.held()) != 1 {
		t.Fatalf("w0 holds %v, w1 %v; want two and one", w0.held(), w1.held())
	}
	free := shards[3].ID
	if _, err := w0.c.Table().Create(ctx, Lease{Shard: free}); err != nil { // another worker's shard sync
		t.Fatal(err)
	}
	w0.scanNow(ctx, free) // at its target (two of four): leaves it to w1
	if slices.Contains(w0.held(), free) {
		t.Fatalf("w0 took %s; the test wants it left to w1", free)
	}
	warned := func() bool { return strings.Contains(logs.String(), "stayed unowned") }
	for elapsed := time.Duration(0); elapsed < w0.c.unownedWarnAfter()+cfg.TakeInterval && !warned(); {
		elapsed += cfg.TakeInterval
		w0.clk.Advance(cfg.TakeInterval)
		w0.cycle(ctx)
		w1.clk.Advance(cfg.TakeInterval)
		w1.c.renewCycle(ctx) // alive, never taking
		if warned() && elapsed < w0.c.unownedWarnAfter() {
			t.Fatalf("warned %v after the lease was first seen free, before %v:\n%s", elapsed, w0.c.unownedWarnAfter(), logs.String())
		}
	}
	if !warned() || !strings.Contains(logs.String(), free) {
		t.Errorf("no WARN naming %s, free for %v:\n%s", free, w0.c.unownedWarnAfter()+cfg.TakeInterval, logs.String())
	}
}
