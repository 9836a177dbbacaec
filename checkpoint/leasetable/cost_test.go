package leasetable

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws"
)

// The Kinesis Client Library's DynamoDB rates with its defaults (KCL 2.x
// lease-count assignment, read from its source: LeaseManagementConfig
// failoverTimeMillis 10000 and epsilonMillis 25; DynamoDBLeaseCoordinator
// renews every held lease every failoverTime/3 - epsilon and scans the
// whole table every (failoverTime + epsilon) * 2 on every worker).
const (
	kclRenewEvery = 10*time.Second/3 - 25*time.Millisecond // 3.308s
	kclScanEvery  = 2 * (10*time.Second + 25*time.Millisecond)
)

// kclPerShardHour returns the KCL's idle writes and items read per
// shard-hour for workers workers: one renewal per lease per renew period,
// one item per lease per scan per worker.
func kclPerShardHour(workers int) (writes, reads float64) {
	return float64(time.Hour) / float64(kclRenewEvery), float64(workers) * float64(time.Hour) / float64(kclScanEvery)
}

// BenchmarkLeaseCost measures the DynamoDB writes and items read per
// shard-hour of idle workers in the steady state, in virtual time on
// dynalite (a counting client wrapper): 1 and 100 shards, 1 and 2 workers,
// the default liveness and RenewEveryLease (the KCL's way, measured in the
// same run), against the KCL's rates computed from its defaults (metrics
// kcl-*, and the ratios weir/KCL). Each run simulates 5 minutes of
// balancing first (unmeasured), then 20 minutes, every period at its
// default; the counts are scaled to an hour.
//
//	go test -run '^$' -bench LeaseCost ./checkpoint/leasetable
func BenchmarkLeaseCost(b *testing.B) {
	for _, every := range []bool{false, true} {
		for _, shards := range []int{1, 100} {
			for _, workers := range []int{1, 2} {
				mode := "one-per-worker"
				if every {
					mode = "every-lease"
				}
				b.Run(fmt.Sprintf("%s/shards=%d/workers=%d", mode, shards, workers), func(b *testing.B) {
					var writes, reads, scans float64
					for range b.N {
						writes, reads, scans = simulateCost(b, shards, workers, every)
					}
					b.ReportMetric(scans, "scans/worker-h")
					kw, kr := kclPerShardHour(workers)
					b.ReportMetric(writes, "writes/shard-h")
					b.ReportMetric(reads, "reads/shard-h")
					b.ReportMetric(kw, "kcl-writes/shard-h")
					b.ReportMetric(kr, "kcl-reads/shard-h")
					b.ReportMetric(writes/kw, "writes/kcl")
					b.ReportMetric(reads/kr, "reads/kcl")
				})
			}
		}
	}
}

// simulateCost runs workers idle workers on shards shards and returns the
// writes and items read per shard-hour of the steady state, and the scans
// per worker-hour.
func simulateCost(b *testing.B, shards, workers int, every bool) (writes, reads, scans float64) {
	ctx := context.Background()
	env := servers.Env(b)
	table := localaws.UniqueName(b)
	list := shardIDs(shards)
	var ws []*worker
	var dbs []*countingDB
	for i := range workers {
		db := &countingDB{DynamoDBAPI: env.DynamoDB()}
		dbs = append(dbs, db)
		ws = append(ws, newWorker(b, table, fmt.Sprintf("w%d", i), db, func(c *CoordinatorConfig) {
			c.RenewEveryLease = every
		}))
	}
	if err := ws[0].c.SyncShards(ctx, list); err != nil {
		b.Fatal(err)
	}
	cfg := ws[0].c.cfg
	step := func(from, to time.Duration) {
		type event struct {
			at   time.Duration
			kind int // 0 renew, 1 take, 2 shard sync
		}
		var evs []event
		for k, d := range []time.Duration{cfg.RenewInterval, cfg.TakeInterval, cfg.ShardSyncInterval} {
			for at := (from/d + 1) * d; at <= to; at += d {
				evs = append(evs, event{at, k})
			}
		}
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
		start := ws[0].clk.Now().Add(-from)
		for _, ev := range evs {
			for _, w := range ws {
				w.clk.Set(start.Add(ev.at))
				switch ev.kind {
				case 0:
					w.c.renewCycle(ctx)
				case 1:
					w.c.takeCycle(ctx)
				case 2:
					if err := w.c.SyncShards(ctx, list); err != nil {
						b.Fatal(err)
					}
				}
				w.c.deliver()
			}
		}
		for _, w := range ws {
			w.clk.Set(start.Add(to))
		}
	}
	for _, w := range ws {
		w.c.takeCycle(ctx)
	}
	warm := 5 * time.Minute // 100 shards over 2 workers: 50 steals, one per take cycle
	step(0, warm)
	var r0, w0, s0 int
	for _, db := range dbs {
		s, _, r, w := db.counts()
		r0, w0, s0 = r0+r, w0+w, s0+s
	}
	const sim = 20 * time.Minute
	step(warm, warm+sim)
	var r1, w1, s1 int
	for _, db := range dbs {
		s, _, r, w := db.counts()
		r1, w1, s1 = r1+r, w1+w, s1+s
	}
	perHour := float64(time.Hour) / float64(sim)
	perShardHour := perHour / float64(shards)
	return float64(w1-w0) * perShardHour, float64(r1-r0) * perShardHour, float64(s1-s0) * perHour / float64(workers)
}
