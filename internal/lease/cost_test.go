package lease

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws"
)

// The Kinesis Client Library's DynamoDB periods with its defaults (KCL 2.x
// lease-count assignment, read from its source: LeaseManagementConfig
// failoverTimeMillis 10000 and epsilonMillis 25; DynamoDBLeaseCoordinator
// renews every held lease every failoverTime/3 - epsilon and scans the
// whole table every (failoverTime + epsilon) * 2 on every worker).
const (
	kclRenewEvery = 10*time.Second/3 - 25*time.Millisecond // 3.308s
	kclScanEvery  = 2 * (10*time.Second + 25*time.Millisecond)
)

// kclPerShardHour returns the KCL's idle writes and items read per
// shard-hour for workers workers, computed from its periods: one renewal
// per lease per renew period, one item per lease per scan per worker.
func kclPerShardHour(workers int) (writes, reads float64) {
	return float64(time.Hour) / float64(kclRenewEvery), float64(workers) * float64(time.Hour) / float64(kclScanEvery)
}

// A costMode is a lease configuration the cost and failover benchmarks
// run.
type costMode struct {
	name  string
	tweak func(*CoordinatorConfig)
	kcl   bool // scans read eventually consistently, as the KCL's do
}

// costModes are weir's default liveness; RenewEveryLease (for fleets
// mixing KCL workers); the KCL's own algorithm and periods, run by weir's
// code (RenewEveryLease judges each lease by its own counter and scans the
// table every take cycle, as the KCL's taker does, here at the KCL's
// periods): the baseline measured in the same run; and weir's default
// liveness with a 30s lease, whose failover time is the KCL's.
var costModes = []costMode{
	{"weir", func(*CoordinatorConfig) {}, false},
	{"weir-every-lease", func(c *CoordinatorConfig) { c.RenewEveryLease = true }, false},
	{"kcl", func(c *CoordinatorConfig) {
		c.RenewEveryLease = true
		c.RenewInterval, c.TakeInterval = kclRenewEvery, kclScanEvery
	}, true},
	{"weir-30s", func(c *CoordinatorConfig) { c.LeaseDuration = 30 * time.Second }, false},
}

// costKey names one simulated configuration.
type costKey struct {
	mode            string
	load            bool
	shards, workers int
}

// costResult is what simulateCost measured: items written and read and
// capacity units consumed per shard-hour, and scans per worker-hour.
type costResult struct{ writes, reads, wcu, rcu, scans float64 }

// kclCosts memoizes the kcl mode's results, the baseline of the ratios.
var kclCosts = struct {
	sync.Mutex
	m map[costKey]costResult
}{m: make(map[costKey]costResult)}

// BenchmarkLeaseCost measures the DynamoDB capacity units (what DynamoDB
// bills: rcu and wcu, as the server reports them), items written and items
// read per shard-hour of workers in the steady state, in virtual time on dynalite (a
// counting client wrapper): 1 and 100 shards, 1 and 2 workers, idle and
// under load (every held shard checkpointed every
// DefaultCheckpointInterval, as weir's receiver does by default and the
// KCL's sample applications do), for each of costModes. The kcl mode is
// the baseline, measured in the same run: wcu/kcl, rcu/kcl, writes/kcl and
// reads/kcl are ratios to it (kcl-model-* are the KCL's idle rates computed from its
// periods, which that mode matches). Each run simulates 55 take cycles (at
// least 5 minutes; 5 for the kcl mode) of balancing first, unmeasured, then
// 10 minutes; the counts are scaled to an hour. Under -short (scripts/test's
// smoke run, which measures nothing) the tables have 1 and 8 shards, and
// each run simulates a minute of balancing and a minute measured.
// BenchmarkLeaseFailover gives each mode's failover time.
//
//	go test -run '^$' -bench LeaseCost -benchtime 1x ./checkpoint/leasetable
func BenchmarkLeaseCost(b *testing.B) {
	shardCounts := []int{1, 100}
	if testing.Short() {
		// scripts/test runs every benchmark once with -short, so that none
		// rots: a table of 100 shards costs a minute and a half there.
		shardCounts = []int{1, 8}
	}
	for _, m := range costModes {
		for _, load := range []bool{false, true} {
			if load && m.name == "weir-every-lease" {
				continue // the same checkpoints as weir's; only the renewals differ
			}
			for _, shards := range shardCounts {
				for _, workers := range []int{1, 2} {
					state := "idle"
					if load {
						state = "load"
					}
					k := costKey{m.name, load, shards, workers}
					b.Run(fmt.Sprintf("%s/%s/shards=%d/workers=%d", m.name, state, shards, workers), func(b *testing.B) {
						var r costResult
						for range b.N {
							if m.name == "kcl" {
								r = kclCost(b, k) // simulated once for the ratios of every mode
							} else {
								r = simulateCost(b, k, m)
							}
						}
						kcl := kclCost(b, k)
						b.ReportMetric(r.scans, "scans/worker-h")
						b.ReportMetric(r.wcu, "wcu/shard-h")
						b.ReportMetric(r.rcu, "rcu/shard-h")
						b.ReportMetric(r.writes, "writes/shard-h")
						b.ReportMetric(r.reads, "reads/shard-h")
						b.ReportMetric(r.wcu/kcl.wcu, "wcu/kcl")
						b.ReportMetric(r.rcu/kcl.rcu, "rcu/kcl")
						b.ReportMetric(r.writes/kcl.writes, "writes/kcl")
						b.ReportMetric(r.reads/kcl.reads, "reads/kcl")
						if m.name == "kcl" && !load {
							kw, kr := kclPerShardHour(workers)
							b.ReportMetric(kw, "kcl-model-writes/shard-h")
							b.ReportMetric(kr, "kcl-model-reads/shard-h")
						}
					})
				}
			}
		}
	}
}

// kclCost returns the kcl mode's result for k's shards, workers and load,
// simulating it once per process.
func kclCost(b *testing.B, k costKey) costResult {
	k.mode = "kcl"
	kclCosts.Lock()
	defer kclCosts.Unlock()
	if r, ok := kclCosts.m[k]; ok {
		return r
	}
	r := simulateCost(b, k, costModes[2])
	kclCosts.m[k] = r
	return r
}

// A costSim is a set of workers on one table, run in virtual time: every
// periodic action of every worker happens at its period's multiples.
type costSim struct {
	b      *testing.B
	list   []ShardInfo
	ws     []*worker
	dbs    []*countingDB
	dead   []bool
	load   bool
	seq    int64
	offset time.Duration // virtual time already simulated
}

func newCostSim(b *testing.B, shards, workers int, load bool, m costMode) *costSim {
	ctx := context.Background()
	env := servers.Env(b)
	table := localaws.UniqueName(b)
	s := &costSim{b: b, list: shardIDs(shards), dead: make([]bool, workers), load: load}
	for i := range workers {
		db := &countingDB{DynamoDBAPI: env.DynamoDB()}
		s.dbs = append(s.dbs, db)
		w := newWorker(b, table, fmt.Sprintf("w%d", i), db, m.tweak)
		w.c.table.eventualScans = m.kcl
		s.ws = append(s.ws, w)
	}
	if err := s.ws[0].c.SyncShards(ctx, s.list); err != nil {
		b.Fatal(err)
	}
	for _, w := range s.ws {
		w.c.takeCycle(ctx)
		w.c.deliver()
	}
	return s
}

// run advances virtual time by d, running every due action of every live
// worker in time order; it stops early, returning the time reached and
// true, when done (if not nil) reports true after an action.
func (s *costSim) run(d time.Duration, done func() bool) (time.Duration, bool) {
	ctx := context.Background()
	cfg := s.ws[0].c.cfg
	type event struct {
		at   time.Duration
		kind int // 0 renew, 1 take, 2 shard sync, 3 checkpoint
	}
	periods := []time.Duration{cfg.RenewInterval, cfg.TakeInterval, cfg.ShardSyncInterval}
	if s.load {
		periods = append(periods, DefaultCheckpointInterval)
	}
	from, to := s.offset, s.offset+d
	var evs []event
	for k, p := range periods {
		for at := (from/p + 1) * p; at <= to; at += p {
			evs = append(evs, event{at, k})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	start := s.ws[0].clk.Now().Add(-from)
	defer func() {
		for _, w := range s.ws {
			w.clk.Set(start.Add(s.offset))
		}
	}()
	for _, ev := range evs {
		for i, w := range s.ws {
			if s.dead[i] {
				continue
			}
			w.clk.Set(start.Add(ev.at))
			switch ev.kind {
			case 0:
				w.c.renewCycle(ctx)
			case 1:
				w.c.takeCycle(ctx)
			case 2:
				if err := w.c.SyncShards(ctx, s.list); err != nil {
					s.b.Fatal(err)
				}
			case 3:
				for _, l := range w.c.Held() {
					s.seq++
					_ = w.c.Commit(ctx, l.Shard, strconv.FormatInt(s.seq, 10)) // a lost lease is the protocol's business
				}
			}
			w.c.deliver()
		}
		if done != nil && done() {
			s.offset = ev.at
			return ev.at, true
		}
	}
	s.offset = to
	return to, false
}

// counts returns what every worker consumed so far.
func (s *costSim) counts() costResult {
	var c costResult
	for _, db := range s.dbs {
		sc, _, r, w := db.counts()
		rcu, wcu := db.capacity()
		c.writes, c.reads, c.scans = c.writes+float64(w), c.reads+float64(r), c.scans+float64(sc)
		c.rcu, c.wcu = c.rcu+rcu, c.wcu+wcu
	}
	return c
}

// simulateCost runs k's workers on k's shards and returns the writes and
// items read per shard-hour of the steady state, and the scans per
// worker-hour.
func simulateCost(b *testing.B, k costKey, m costMode) costResult {
	s := newCostSim(b, k.shards, k.workers, k.load, m)
	// Balancing first: 100 shards over 2 workers take 50 steals, one per
	// take cycle. The KCL's renewals and scans cost the same however its
	// leases are spread, so its 20s cycles need not wait for it.
	warm := 5 * time.Minute
	if !m.kcl {
		warm = max(warm, 55*s.ws[0].c.cfg.TakeInterval)
	}
	sim := 10 * time.Minute // one ScanInterval: the periodic scan is counted once
	if testing.Short() {
		// scripts/test's smoke run measures nothing: the 8 shards of
		// -short balance over 2 workers in 4 take cycles.
		warm, sim = time.Minute, time.Minute
	}
	s.run(warm, nil)
	c0 := s.counts()
	s.run(sim, nil)
	c1 := s.counts()
	perHour := float64(time.Hour) / float64(sim)
	perShardHour := perHour / float64(k.shards)
	return costResult{
		writes: (c1.writes - c0.writes) * perShardHour,
		reads:  (c1.reads - c0.reads) * perShardHour,
		wcu:    (c1.wcu - c0.wcu) * perShardHour,
		rcu:    (c1.rcu - c0.rcu) * perShardHour,
		scans:  (c1.scans - c0.scans) * perHour / float64(k.workers),
	}
}

// BenchmarkLeaseFailover measures, for each of costModes, how long after a
// worker dies the other one holds its shard, in virtual time on dynalite:
// two workers, one shard, the holder stopped (no more renewals, takes or
// checkpoints) at 8 moments spread over the KCL's scan period. It reports
// the mean and the longest time from the death to the take-over.
//
//	go test -run '^$' -bench LeaseFailover -benchtime 1x ./checkpoint/leasetable
func BenchmarkLeaseFailover(b *testing.B) {
	for _, m := range costModes {
		b.Run(m.name, func(b *testing.B) {
			var mean, worst time.Duration
			for range b.N {
				mean, worst = 0, 0
				const deaths = 8
				for i := range deaths {
					d := measureFailover(b, m, time.Duration(i)*kclScanEvery/deaths+100*time.Millisecond)
					mean += d / deaths
					worst = max(worst, d)
				}
			}
			b.ReportMetric(mean.Seconds(), "failover-mean-s")
			b.ReportMetric(worst.Seconds(), "failover-max-s")
		})
	}
}

// measureFailover runs two workers on one shard for a minute, stops the
// holder phase later, and returns how long after that the other worker
// holds the shard.
func measureFailover(b *testing.B, m costMode, phase time.Duration) time.Duration {
	s := newCostSim(b, 1, 2, false, m)
	s.run(time.Minute+phase, nil)
	holder := -1
	for i, w := range s.ws {
		if len(w.c.Held()) == 1 {
			holder = i
		}
	}
	if holder < 0 {
		b.Fatal("no worker holds the shard after a minute")
	}
	s.dead[holder] = true
	other := s.ws[1-holder]
	died := s.offset
	at, ok := s.run(10*time.Minute, func() bool { return len(other.c.Held()) == 1 })
	if !ok {
		b.Fatal("the shard of a dead worker was not taken within 10 minutes")
	}
	return at - died
}
