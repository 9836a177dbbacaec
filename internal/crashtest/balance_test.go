//go:build unix

package crashtest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/lease"
)

// The lease balance measurement: a stream of balanceShards shards, one
// worker holding every lease, then balanceJoin more.
const (
	balanceShards = 64
	balanceJoin   = 2
	// balanceLimit bounds the wait for a balance: a failure guard, never
	// an assertion about time (the figure is reported, not checked).
	balanceLimit = 5 * time.Minute
)

// balanceTuning is the children's timing on a many-shard stream: slower
// polls and checkpoints than the crash tests', so that three workers on 64
// shards do not swamp two cores and the local servers.
var balanceTuning = childTuning{poll: 200 * time.Millisecond, checkpoint: time.Second}

// TestLeaseBalance measures how a fleet balances its leases, with
// WEIR_BALANCE=1 (it takes from tens of seconds to minutes, so it is kept
// out of the default run): one worker takes every lease of a 64-shard
// stream, two more start, and the test reports the time until each of the
// three holds 21 or 22 leases, in seconds and in take cycles
// (lease.DefaultTakeInterval of the lease duration), and the
// duplicates the moves delivered (every record counted across the three
// outputs), while records keep arriving. It checks that no record is lost
// (G1) and no checkpoint passed the completed records (G4); the time is a
// figure, not an assertion.
func TestLeaseBalance(t *testing.T) {
	if os.Getenv("WEIR_BALANCE") != "1" {
		t.Skip("WEIR_BALANCE=1 runs the lease balance measurement (three workers on 64 shards; a minute or more)")
	}
	env := servers.Env(t)
	first := newHarness(t, env, balanceShards)
	first.tuning = balanceTuning
	first.tuning.worker = "balance-1"
	fleet := []*harness{first}
	for i := range balanceJoin {
		fleet = append(fleet, first.member(fmt.Sprintf("balance-%d", i+2)))
	}
	prod, stopProducer := startProducer(t, first)
	defer stopProducer()

	c1 := first.start()
	alone := first.awaitOwners("balance-1 holding every lease", balanceLimit, func(o map[string]int) bool {
		return o["balance-1"] == balanceShards
	}, c1)
	children := []*child{c1}
	for _, m := range fleet[1:] {
		children = append(children, m.start())
	}
	lo, hi := balanceShards/len(fleet), (balanceShards+len(fleet)-1)/len(fleet)
	took := first.awaitOwners(fmt.Sprintf("balanced (each worker %d or %d leases)", lo, hi), balanceLimit, func(o map[string]int) bool {
		for _, m := range fleet {
			if n := o[m.tuning.worker]; n < lo || n > hi {
				return false
			}
		}
		return true
	}, children...)

	stopProducer()
	put, maybe, maxSeq := prod.snapshot()
	exited, why := anyExited(children...)
	awaitRecordsIn(t, fleetOutputs(fleet...), put, exited, why)
	for _, c := range children {
		c.term()
	}
	f := checkAtLeastOnceIn(t, put, maybe, fleet...)
	for _, m := range fleet {
		m.checkLog()
		m.checkJournal()
	}
	first.checkLeases(maxSeq)
	cycle := lease.DefaultTakeInterval(leaseDuration)
	report(t, fmt.Sprintf("balance: %d shards: one worker held every lease after %v; %d more balanced them (%d to %d each) in %v, %.1f take cycles of %v; %v",
		balanceShards, alone.Round(time.Millisecond), balanceJoin, lo, hi, took.Round(time.Millisecond), float64(took)/float64(cycle), cycle, f))
}
