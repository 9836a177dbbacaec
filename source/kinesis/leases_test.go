package kinesis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/kinesis"
)

func TestLeasesSpreadShardsOverWorkersAndDeliverEverything(t *testing.T) {
	// Leases of 6s (renewed every 2s, each DynamoDB attempt bounded by
	// 1.2s): a loaded machine (-race, parallel test runs) can stall a
	// renewal past a 2s lease, and the worker then counts the lease lost at
	// its final checkpoint. The spread's speed is only logged.
	const leaseDuration = 6 * time.Second
	f := newFleet(t, 8)
	data := payloads("spread", 3000)
	f.put(data[:1500])
	// Default periods and steals (1 per cycle, as KCL).
	ws := []*worker{f.start("w1", leaseDuration, nil), f.start("w2", leaseDuration, nil), f.start("w3", leaseDuration, nil)}
	// The spread is the table's: a worker a lease was stolen from learns
	// it at its next checkpoint of the shard or its next scan of the table.
	took := f.waitFor("each of 3 workers owns 2 or 3 of the 8 leases", func() bool {
		leases, err := f.tryLeases()
		if err != nil || len(leases) != 8 {
			return false
		}
		per := map[string]int{}
		for _, l := range leases {
			per[l.Owner]++
		}
		for _, w := range ws {
			if n := per[w.id]; n < 2 || n > 3 {
				return false
			}
		}
		return per[""] == 0
	})
	// The bound is asserted in virtual time by checkpoint's
	// TestCoordinatorConverges; here it is only logged.
	t.Logf("balanced after %v (%.2f lease durations; bound 2 lease durations = %v)",
		took.Round(time.Millisecond), took.Seconds()/leaseDuration.Seconds(), 2*leaseDuration)
	f.put(data[1500:])
	f.waitFor("every record in some output", f.allDelivered(data))

	// A graceful stop makes the last checkpoints once every record is
	// completed, and hands the leases back.
	for _, w := range ws {
		w.drain(t)
	}
	want := f.lastSeqs()
	for shard, l := range f.leases() {
		if l.Owner != "" || l.Checkpoint != want[shard] {
			t.Errorf("shard %s after drain: owner %q, checkpoint %s; want no owner, checkpoint %s", shard, l.Owner, l.Checkpoint, want[shard])
		}
	}
}

func TestLeasesOfAKilledWorkerAreTakenOver(t *testing.T) {
	t.Parallel()
	const leaseDuration, takeInterval = 2 * time.Second, 50 * time.Millisecond
	f := newFleet(t, 4)
	data := payloads("kill", 2000)
	f.put(data[:1000])
	// w1 takes two leases, w2 the two others; nobody steals, so the
	// take-over is the only way leases move.
	// A lease is taken at the first scan at least LeaseDuration after the
	// first scan that saw its last renewal: with TakeInterval dividing
	// LeaseDuration, at most LeaseDuration + TakeInterval after the kill
	// (asserted in virtual time by checkpoint's
	// TestCoordinatorExpiredLeasesTaken); in real time a scan's latency can
	// push the expiry past one scan, adding up to another TakeInterval.
	noSteal := func(max int) func(*kinesis.Config) {
		return func(c *kinesis.Config) {
			c.Leases.MaxStealsPerCycle, c.Leases.MaxLeases, c.Leases.TakeInterval = -1, max, takeInterval
		}
	}
	w1 := f.start("w1", leaseDuration, noSteal(2))
	f.waitFor("w1 holds 2 leases", func() bool { return len(w1.held()) == 2 })
	w2 := f.start("w2", leaseDuration, noSteal(0))
	f.waitFor("w2 holds 2 leases", func() bool { return len(w2.held()) == 2 })
	f.waitFor("the first records delivered", f.allDelivered(data[:1000]))

	w1.kill() // no final checkpoint, no release
	killed := time.Now()
	f.put(data[1000:])
	f.waitFor("w2 holds every lease", func() bool { return len(w2.held()) == 4 })
	t.Logf("taken over %v after the kill (bound LeaseDuration + TakeInterval = %v, + latency up to %v)",
		time.Since(killed).Round(time.Millisecond), leaseDuration+takeInterval, leaseDuration+2*takeInterval)
	f.waitFor("every record in some output", f.allDelivered(data))
}

func TestLeasesPausedWorkerStopsAndNeverCheckpointsAgain(t *testing.T) {
	t.Parallel()
	const leaseDuration = 2 * time.Second
	f := newFleet(t, 4)
	before := payloads("before", 800)
	after := payloads("after", 800)
	f.put(before)
	w1 := f.start("zombie", leaseDuration, func(c *kinesis.Config) { c.Leases.MaxStealsPerCycle, c.Leases.MaxLeases = -1, 2 })
	f.waitFor("w1 holds 2 leases", func() bool { return len(w1.held()) == 2 })
	w2 := f.start("heir", leaseDuration, func(c *kinesis.Config) { c.Leases.MaxStealsPerCycle = -1 })
	f.waitFor("w2 holds 2 leases", func() bool { return len(w2.held()) == 2 })
	f.waitFor("the first records delivered", f.allDelivered(before))
	lostShards := w1.held()

	// Pause w1: every DynamoDB and Kinesis call it makes is held, as if
	// the process were stopped; its clock runs on.
	w1.ddb.gate.pause()
	w1.kc.gate.pause()
	took := f.waitFor("w2 took over w1's leases", func() bool { return len(w2.held()) == 4 })
	t.Logf("w2 took over %v after the pause (lease duration %v)", took.Round(time.Millisecond), leaseDuration)
	f.put(after)
	f.waitFor("every record in some output", f.allDelivered(append(before, after...)))
	f.waitFor("w2 checkpointed w1's former shards", func() bool {
		for _, wr := range w2.ddb.checkpoints() {
			delete(lostShards, wr.shard)
		}
		return len(lostShards) == 0
	})

	// w1's renewals, held by the silent table, were abandoned when its
	// leases expired on its own clock: it counts them lost while still
	// cut off, and stops reading them, before anything comes back.
	f.waitFor("w1 counts its leases lost while cut off", func() bool { return len(w1.held()) == 0 })
	resumed := time.Now()
	w1.kc.gate.resume()
	w1.ddb.gate.resume()
	f.waitFor("w1 holds no lease and reads no shard", func() bool {
		if len(w1.held()) > 0 {
			return false
		}
		for _, sh := range w1.r.Stats().Shards {
			if sh.Reading {
				return false
			}
		}
		return true
	})
	// Let both checkpointers run a few more rounds.
	commits := w2.r.CheckpointStats().Commits + w2.r.CheckpointStats().Skips
	f.waitFor("w2 ran more checkpoint rounds", func() bool {
		s := w2.r.CheckpointStats()
		return s.Commits+s.Skips >= commits+8
	})
	for _, wr := range w1.ddb.checkpoints() {
		if !wr.at.Before(resumed) {
			t.Errorf("the paused worker wrote checkpoint %s of shard %s after it resumed", wr.seq, wr.shard)
		}
	}
	for _, r := range w1.records() {
		if strings.HasPrefix(string(r.Data), "after") {
			t.Fatalf("the paused worker delivered %q, put after it lost its leases", r.Data)
		}
	}
	w1.kill()
	w2.drain(t)
	last := map[string]string{}
	for _, wr := range w2.ddb.checkpoints() {
		last[wr.shard] = wr.seq
	}
	for shard, l := range f.leases() {
		if l.Checkpoint != last[shard] {
			t.Errorf("shard %s: table checkpoint %s, want w2's last %s", shard, l.Checkpoint, last[shard])
		}
	}
}

func TestLeasesCheckpointReachesTheLatestWithoutNewData(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2)
	data := payloads("quiet", 600)
	w := f.start("w", 2*time.Second, nil)
	f.waitFor("w holds both leases", func() bool { return len(w.held()) == 2 })
	f.put(data[:300])
	f.waitFor("the first records delivered", f.allDelivered(data[:300]))
	f.put(data[300:])
	f.waitFor("every record delivered", f.allDelivered(data))
	want := f.lastSeqs()
	f.waitFor("the table's checkpoints reach the last records", func() bool {
		for shard, l := range f.leases() {
			if l.Checkpoint != want[shard] {
				return false
			}
		}
		return true
	})
	// No new data for several intervals: rounds run, nothing is written.
	s := w.r.CheckpointStats()
	f.waitFor("5 more checkpoint rounds", func() bool { return w.r.CheckpointStats().Skips >= s.Skips+10 })

	writes := w.ddb.checkpoints()
	seen := map[string]string{}
	for _, wr := range writes {
		if prev, ok := seen[wr.shard]; ok && batch.CompareSeq(wr.seq, prev) <= 0 {
			t.Errorf("shard %s: checkpoint %s written after %s", wr.shard, wr.seq, prev)
		}
		seen[wr.shard] = wr.seq
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("last checkpoint written per shard (-want +got):\n%s", diff)
	}
	if got := w.r.CheckpointStats(); got.Commits != int64(len(writes)) || got.Failures != 0 {
		t.Errorf("checkpointer counted %d commits, %d failures; %d distinct checkpoints were written", got.Commits, got.Failures, len(writes))
	}
}

func TestLeasesShardEndThenChildren(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 1)
	data := payloads("split", 800)
	w := f.start("w", time.Second, nil)
	f.waitFor("w holds the lease", func() bool { return len(w.held()) == 1 })
	f.put(data[:400])
	f.waitFor("the parent's records delivered", f.allDelivered(data[:400]))

	parent := f.split()
	f.put(data[400:])
	f.waitFor("every record delivered", f.allDelivered(data))
	// Once both children are checkpointed past their start, the parent's
	// lease (at SHARD_END) is deleted, as the KCL's clean-up does.
	f.waitFor("both children are checkpointed and the parent's lease deleted", func() bool {
		ls := f.leases()
		if len(ls) != 2 {
			return false
		}
		for _, l := range ls {
			if !isDigits(l.Checkpoint) {
				return false
			}
		}
		return true
	})
	// No child record was delivered before the parent's last one.
	recs := w.records()
	lastParent, firstChild := -1, len(recs)
	for i, r := range recs {
		if r.ShardID == parent {
			lastParent = i
		} else if i < firstChild {
			firstChild = i
		}
	}
	if firstChild < lastParent {
		t.Errorf("a child record (#%d) was delivered before the parent's last one (#%d)", firstChild, lastParent)
	}
	w.drain(t)
}

func TestLeasesUnreachableTableFailsStart(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 1)
	cfg := f.config("w", time.Second, nil, &kinesisSpy{next: f.env.Kinesis()})
	awsCfg := f.env.AWSConfig()
	cfg.AWS = &awsCfg
	cfg.Leases.DynamoDB, cfg.Leases.Endpoint = nil, "http://127.0.0.1:1" // nothing listens there
	r, err := kinesis.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := source.Runtime[kinesis.Record]{Push: func(context.Context, source.Block[kinesis.Record]) (batch.BlockInfo, error) {
		return batch.BlockInfo{}, errors.New("nothing may be pushed")
	}}
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	err = r.Start(ctx, rt)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "lease table "+f.table) {
		t.Errorf("Start = %v, want an error naming the lease table", err)
	}
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func TestLeasesBadConfigFailsBeforeAnythingStarts(t *testing.T) {
	base := func() kinesis.Config {
		return kinesis.Config{Stream: "s", App: "app", Leases: &leasetable.Config{}}
	}
	tests := []struct {
		name  string
		edit  func(*kinesis.Config)
		wants []string
	}{
		{"negative checkpoint interval", func(c *kinesis.Config) { c.Leases.CheckpointInterval = -time.Second }, []string{"Leases.CheckpointInterval -1s: must be > 0"}},
		{"table name too short", func(c *kinesis.Config) { c.Leases.TableName = "ab" }, []string{"Leases.TableName", "3 to 255"}},
		{"table name from an App with a space", func(c *kinesis.Config) { c.App = "word count" }, []string{`defaults to App "word count"`, "set Leases.TableName"}},
		{"lease shorter than the renew period", func(c *kinesis.Config) {
			c.Leases.LeaseDuration, c.Leases.RenewInterval = time.Second, 2*time.Second
		}, []string{"Leases.RenewInterval 2s: must be shorter than LeaseDuration 1s"}},
		{"lease client with an endpoint", func(c *kinesis.Config) {
			c.Leases.DynamoDB, c.Leases.Endpoint = dynamodb.New(dynamodb.Options{Region: "us-east-1"}), "http://127.0.0.1:4568"
		}, []string{"Leases.DynamoDB is set with Endpoint", "would be ignored"}},
		{"lease duration in seconds by mistake", func(c *kinesis.Config) { c.Leases.LeaseDuration = 10 },
			[]string{"Leases.LeaseDuration 10ns: must be at least 1s", "n * time.Second"}},
		{"several at once", func(c *kinesis.Config) {
			c.Leases.TableName, c.Leases.LeaseDuration, c.Leases.MaxLeases = "a b c", -time.Second, -1
		}, []string{"Leases.TableName", "Leases.LeaseDuration -1s", "Leases.MaxLeases -1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			_, err := kinesis.New(cfg)
			if !errors.Is(err, kinesis.ErrInvalidConfig) {
				t.Fatalf("New: %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if _, err := kinesis.New(base()); err != nil {
		t.Errorf("New with default leases: %v", err)
	}
}

// TestLeasesShardForgottenAfterHandOff checks that a worker that handed a
// shard's lease off to another stops reporting the shard some time after
// (in its Stats and CheckpointStats), while its checkpoint totals keep
// what the shard counted: metric series of shards long gone do not pile
// up on a worker whose leases move.
func TestLeasesShardForgottenAfterHandOff(t *testing.T) {
	t.Parallel()
	const leaseDuration = 2 * time.Second
	f := newFleet(t, 2)
	data := payloads("d", 100)
	f.put(data)
	forget := func(c *kinesis.Config) { kinesis.ForgetShardsAfter(c, 200*time.Millisecond) }
	w1 := f.start("w1", leaseDuration, forget)
	f.waitFor("w1 holds 2 leases", func() bool { return len(w1.held()) == 2 })
	f.waitFor("every record in some output", f.allDelivered(data))
	f.waitFor("w1 checkpointed", func() bool { return w1.r.CheckpointStats().Commits >= 2 })
	w2 := f.start("w2", leaseDuration, forget)
	f.waitFor("w2 holds a lease", func() bool { return len(w2.held()) == 1 })
	var moved string
	for shard := range w2.held() {
		moved = shard
	}
	f.waitFor("w1 forgot the shard it handed off", func() bool {
		_, inStats := w1.r.Stats().Shards[moved]
		_, inCheckpoints := w1.r.CheckpointStats().Shards[moved]
		return !inStats && !inCheckpoints
	})
	st, cp := w1.r.Stats(), w1.r.CheckpointStats()
	if len(st.Shards) != 1 || len(cp.Shards) != 1 {
		t.Errorf("w1 reports %d shards in Stats and %d in CheckpointStats, want the one it holds", len(st.Shards), len(cp.Shards))
	}
	var sum int64
	for _, s := range cp.Shards {
		sum += s.Commits
	}
	if cp.Commits <= sum {
		t.Errorf("w1's Commits %d, want more than the %d of the shard it holds: the shard forgotten counted too", cp.Commits, sum)
	}
	if st.RecordsRead != int64(len(data)) {
		t.Errorf("w1's RecordsRead %d, want the %d it read, the forgotten shard's included", st.RecordsRead, len(data))
	}
}
