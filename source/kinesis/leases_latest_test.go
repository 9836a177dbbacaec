package kinesis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpointer"
	"github.com/weirstream/weir/source/kinesis"
)

// TestLeasesLatestDeathBeforeFirstCheckpoint starts a worker at LATEST
// (the default) with a checkpoint interval it never reaches, has it read
// records put after it started, kills it, and starts another worker: the
// lease is still at LATEST, and the new owner must read from where the
// first one started (the time its take pinned, Lease.LatestAt), not from
// the stream's new tip, or every record the dead worker read is lost.
func TestLeasesLatestDeathBeforeFirstCheckpoint(t *testing.T) {
	const leaseDuration = time.Second
	f := newFleet(t, 1)
	latest := func(c *kinesis.Config) {
		c.InitialPosition = kinesis.Latest
		c.Leases.CheckpointInterval = time.Hour // dies before its first checkpoint
	}
	a := f.start("a", leaseDuration, latest)
	f.waitFor("a holds the lease", func() bool { return len(a.held()) == 1 })
	// a's reader starts at LATEST some time after its take: put probes
	// until it delivers one, so that the records below are put after it
	// started reading.
	probes := 0
	f.waitFor("a reads", func() bool {
		for _, r := range a.records() {
			if len(r.Data) > 0 {
				return true
			}
		}
		f.put([][]byte{fmt.Appendf(nil, "probe-%d", probes)})
		probes++
		return false
	})
	after := payloads("after", 100)
	f.put(after)
	f.waitFor("a delivers the records put after it started", f.allDelivered(after))
	a.kill()
	for shard, l := range f.leases() {
		if l.Checkpoint != checkpointer.LatestPosition {
			t.Fatalf("lease %s after a's death: checkpoint %q; the test needs a death before the first checkpoint", shard, l.Checkpoint)
		}
	}

	b := f.start("b", leaseDuration, latest)
	f.waitFor("b takes the lease over and delivers every record put after a started", func() bool {
		return b.deliveredAll(after)
	})
	b.drain(t)
}
