package kinesis_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/weirstream/weir/clock"
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
	t.Parallel()
	const leaseDuration = time.Second
	f := newFleet(t, 1)
	latest := func(c *kinesis.Config) {
		c.InitialPosition = kinesis.Latest
		c.Leases.CheckpointInterval = time.Hour // dies before its first checkpoint
	}
	a := f.start("a", leaseDuration, latest)
	f.waitFor("a holds the lease", func() bool { return len(a.held()) == 1 })
	// a's reader starts at LATEST some time after its take: the records
	// below are put after it started reading.
	f.waitReading(a)
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

// aheadClock is the wall clock of a machine whose clock runs ahead of
// AWS's (here, of the local servers'): Now is shifted, timers and tickers
// are the real ones.
type aheadClock struct {
	clock.Real
	ahead time.Duration
}

// Now returns the wall time plus c.ahead.
func (c aheadClock) Now() time.Time { return time.Now().Add(c.ahead) }

// TestLeasesLatestClockAhead starts a worker at LATEST whose clock runs a
// minute ahead of the servers' and puts records right after it took the
// lease: every one of them must have arrived after the lease's pin (each
// owner reads the shard from it, Lease.LatestAt), and the worker and its
// successor must deliver them. A pin taken from the worker's clock less 5 s
// lies 55 s in the servers' future: Kinesis refuses the iterator (the
// timestamp "cannot be greater than the currentTimestampInMillis"), which
// stops the worker's Run, and whoever reads the shard once that time has
// passed skips every record put before it.
func TestLeasesLatestClockAhead(t *testing.T) {
	t.Parallel()
	const leaseDuration = time.Second
	f := newFleet(t, 1)
	latest := func(c *kinesis.Config) {
		c.InitialPosition = kinesis.Latest
		c.Leases.CheckpointInterval = time.Hour // the successor reads from the pin
		// kinesalite never answers an AT_TIMESTAMP iterator with no record
		// at or after the time (Kinesis returns one at the tip): the
		// reader's first call waits out its attempt.
		c.AttemptTimeout = 2 * time.Second
	}
	a := f.start("a", leaseDuration, func(c *kinesis.Config) {
		latest(c)
		c.Clock = aheadClock{ahead: time.Minute}
	})
	f.waitWhileRuns(a, "a holds the lease", func() bool { return len(a.held()) == 1 })
	gap := payloads("gap", 50)
	f.put(gap)
	var pin time.Time
	for shard, l := range f.leases() {
		if l.Checkpoint != checkpointer.LatestPosition || l.LatestAt.IsZero() {
			t.Fatalf("lease %s: checkpoint %q, pin %v; want LATEST pinned by a's take", shard, l.Checkpoint, l.LatestAt)
		}
		pin = l.LatestAt
	}
	for _, recs := range f.readAll() {
		for _, r := range recs {
			if at := aws.ToTime(r.ApproximateArrivalTimestamp); at.Before(pin) {
				t.Fatalf("record %q, put after a took the lease, arrived at %v, before the lease's pin %v: every owner reads from the pin and skips it",
					r.Data, at.Format(time.RFC3339Nano), pin.Format(time.RFC3339Nano))
			}
		}
	}
	f.waitWhileRuns(a, "a delivers the records put after its take", func() bool { return a.deliveredAll(gap) })
	a.kill()

	b := f.start("b", leaseDuration, latest)
	f.waitFor("b takes the lease over and delivers the records put after a's take", func() bool {
		return b.deliveredAll(gap)
	})
	b.drain(t)
}

// waitWhileRuns is waitFor that fails the test as soon as w's Run stops,
// with its error: a stopped worker runs no batch that would check cond
// again.
func (f *fleet) waitWhileRuns(w *worker, what string, cond func() bool) {
	f.t.Helper()
	guard := time.NewTimer(deadline)
	defer guard.Stop()
	for !cond() {
		select {
		case <-f.tick:
		case <-w.done:
			f.t.Fatalf("worker %s stopped before %s: %v", w.id, what, w.runErr)
		case <-guard.C:
			f.t.Fatalf("not within %v: %s", deadline, what)
		}
	}
}
