package lease

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/localaws"
)

// recordLog is a slog.Handler that keeps the level and message of every
// record, for counting.
type recordLog struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	level slog.Level
	msg   string
	fix   string // its "fix" attribute
}

func (h *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordLog) WithGroup(string) slog.Handler            { return h }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	l := logLine{level: r.Level, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "fix" {
			l.fix = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, l)
	h.mu.Unlock()
	return nil
}

// count returns how many lines were kept so far.
func (h *recordLog) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.lines)
}

// after returns the lines kept after the first from, at level or above.
func (h *recordLog) after(from int, level slog.Level) []logLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logLine
	for _, l := range h.lines[from:] {
		if l.level >= level {
			out = append(out, l)
		}
	}
	return out
}

// TestLeaseTableOutageWarnsOncePerCall checks that a lease table failing
// every call for many periods (DynamoDB throttled or unreachable) is
// warned about once per kind of call, each warning naming the fix, not at
// every period for as long as it lasts (before, the scan and the read of
// the beat board each logged a WARN every take cycle, one every 3.3 s
// with the default lease duration), and that the end of it is said once
// the calls succeed again.
func TestLeaseTableOutageWarnsOncePerCall(t *testing.T) {
	ctx := t.Context()
	logs := &recordLog{}
	db := &faultDB{DynamoDBAPI: servers.Env(t).DynamoDB()}
	w := newWorker(t, localaws.UniqueName(t), "w", db, func(c *CoordinatorConfig) { c.Logger = slog.New(logs) })
	takeAll(t, w, shardIDs(2))
	from := logs.count() // not the take's warning of the manual clock's skew
	db.setRule(func(string, string) fault { return failBefore })
	const periods = 30 // 100 s: ten lease durations
	for range periods {
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.cycle(ctx)
	}
	if n := len(w.c.Held()); n != 0 {
		t.Fatalf("%d leases held after %d periods of failed calls, want none", n, periods)
	}
	warned := make(map[string]int)
	for _, l := range logs.after(from, slog.LevelWarn) {
		warned[l.msg]++
		if l.fix == "" && warned[l.msg] == 1 {
			t.Errorf("warning %q has no fix attribute", l.msg)
		}
	}
	scanWarned := false
	for msg, n := range warned {
		scanWarned = scanWarned || strings.Contains(msg, "lease scan failed")
		if n > 1 {
			t.Errorf("warned %d times in %d periods of a failing lease table: %q; want once", n, periods, msg)
		}
	}
	if !scanWarned {
		t.Errorf("no warning of the failing lease scan; warnings: %v", warned)
	}

	db.setRule(nil)
	for range 2 {
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.cycle(ctx)
	}
	if n := len(w.c.Held()); n != 2 {
		t.Errorf("%d leases held once the lease table answers again, want 2", n)
	}
	again := false
	for _, l := range logs.after(from, slog.LevelInfo) {
		again = again || l.msg == "leasetable: lease scan succeeds again after failing"
	}
	if !again {
		t.Error("no line saying the lease scan succeeds again")
	}
}

// keyFaultDB fails, before sending them, the UpdateItems of the leases
// whose leaseKey and update expression fail accepts.
type keyFaultDB struct {
	leasetable.DynamoDBAPI
	fail func(shard, expr string) bool
}

func (f *keyFaultDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if k, ok := in.Key[attrKey].(*types.AttributeValueMemberS); ok && f.fail(k.Value, aws.ToString(in.UpdateExpression)) {
		return nil, errInjected
	}
	return f.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// TestOneLeaseRenewalFailingWarnsOnce checks, with RenewEveryLease, that
// the renewal of one lease failing every period while the others' succeed
// is warned about once, not said to succeed again: the streak of a kind
// of call is that of the calls that failed, and another lease's renewal
// succeeding ends nothing. Before, each other lease's success ended it
// ("lease renewal succeeds again"), and the failing lease's next failure
// was warned about again, at every period.
func TestOneLeaseRenewalFailingWarnsOnce(t *testing.T) {
	ctx := t.Context()
	logs := &recordLog{}
	shards := shardIDs(3)
	bad := shards[0].ID
	db := &keyFaultDB{DynamoDBAPI: servers.Env(t).DynamoDB(), fail: func(string, string) bool { return false }}
	w := newWorker(t, localaws.UniqueName(t), "w", db, func(c *CoordinatorConfig) {
		c.Logger = slog.New(logs)
		c.RenewEveryLease = true
		c.RenewInterval = testLease / 10 // nine failed renewals before the lease is lost
	})
	takeAll(t, w, shards)
	from := logs.count()
	db.fail = func(shard, expr string) bool { return shard == bad && isRenew(expr) }
	const periods = 8 // fewer than a lease duration: the lease stays held
	for range periods {
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.c.renewCycle(ctx)
	}
	if diff := cmp.Diff(ids(shards), w.held()); diff != "" {
		t.Fatalf("leases held (-want +got):\n%s", diff)
	}
	warned := 0
	for _, l := range logs.after(from, slog.LevelInfo) {
		switch {
		case strings.HasPrefix(l.msg, "leasetable: lease renewal failed; retrying next period"):
			if l.level >= slog.LevelWarn {
				warned++
			}
		case l.msg == "leasetable: lease renewal succeeds again after failing":
			t.Errorf("logged %q while the renewal of %s failed at every period", l.msg, bad)
		}
	}
	if warned != 1 {
		t.Errorf("the renewal of %s failing for %d periods was warned about %d times; want once", bad, periods, warned)
	}

	db.fail = func(string, string) bool { return false }
	w.clk.Advance(w.c.cfg.RenewInterval)
	w.c.renewCycle(ctx)
	again := 0
	for _, l := range logs.after(from, slog.LevelInfo) {
		if l.msg == "leasetable: lease renewal succeeds again after failing" {
			again++
		}
	}
	if again != 1 {
		t.Errorf("said %d times that the renewals succeed again once %s's did; want once", again, bad)
	}
}

// TestTakeFailingAgainLaterWarns checks that a take that failed, then was
// not made again (another worker took the lease), does not leave its
// kind's streak open for good: a take failing much later, in a new outage,
// is warned about again. Before, the streak only ended at a take that
// succeeded, and a worker holding its share took nothing for as long as
// the fleet stayed as it was, so every later take failure was at DEBUG.
func TestTakeFailingAgainLaterWarns(t *testing.T) {
	ctx := t.Context()
	logs := &recordLog{}
	table := localaws.UniqueName(t)
	env := servers.Env(t)
	failTakes := false
	db := &keyFaultDB{DynamoDBAPI: env.DynamoDB(), fail: func(_, expr string) bool { return failTakes && isTake(expr) }}
	w := newWorker(t, table, "w", db, func(c *CoordinatorConfig) { c.Logger = slog.New(logs) })
	o := newWorker(t, table, "o", env.DynamoDB(), func(c *CoordinatorConfig) { c.Clock = w.clk })
	o.clk = w.clk
	shards := shardIDs(2)
	if err := w.c.SyncShards(ctx, shards[:1]); err != nil {
		t.Fatal(err)
	}
	warnings := func() int {
		n := 0
		for _, l := range logs.after(0, slog.LevelWarn) {
			if strings.HasPrefix(l.msg, "leasetable: taking a lease failed") {
				n++
			}
		}
		return n
	}

	failTakes = true // a blip: w's take fails, o takes the lease
	w.cycle(ctx)
	failTakes = false
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings of the failed take, want 1", n)
	}
	o.cycle(ctx)
	if got := o.held(); len(got) != 1 {
		t.Fatalf("o holds %v, want the lease", got)
	}
	for range 30 { // 100 s: w takes nothing, o holds the lease
		w.clk.Advance(w.c.cfg.RenewInterval)
		o.cycle(ctx)
		w.cycle(ctx)
	}
	if got := w.held(); len(got) != 0 {
		t.Fatalf("w holds %v, want none", got)
	}

	failTakes = true // a new outage of w's takes, of a new shard
	if err := w.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(w.c.cfg.RenewInterval)
	o.cycle(ctx)
	w.cycle(ctx)
	if n := warnings(); n != 2 {
		t.Errorf("%d warnings of failed takes after a new one failed, want 2: the first streak never ended", n)
	}
}
