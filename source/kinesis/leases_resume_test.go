package kinesis_test

import (
	"testing"
	"time"

	"github.com/weirstream/weir/source/kinesis"
)

// TestLeasesRetakenResumeAfterCompletedRecords cuts a worker off from
// DynamoDB for longer than its lease, after it completed records whose
// checkpoint it could not write (its checkpoint interval is long), and
// checks that once it takes the leases back it reads after what it
// completed, not after the stale checkpoint: nothing is delivered twice.
func TestLeasesRetakenResumeAfterCompletedRecords(t *testing.T) {
	t.Parallel()
	const leaseDuration = time.Second
	f := newFleet(t, 2)
	before := payloads("before", 400)
	f.put(before)
	w := f.start("w", leaseDuration, func(c *kinesis.Config) { c.Leases.CheckpointInterval = time.Hour })
	f.waitFor("w holds both leases", func() bool { return len(w.held()) == 2 })
	f.waitFor("the first records delivered", f.allDelivered(before))

	w.ddb.gate.pause()
	f.waitFor("w counts its leases lost", func() bool { return len(w.held()) == 0 })
	w.ddb.gate.resume()
	f.waitFor("w takes its leases back", func() bool { return len(w.held()) == 2 })
	for shard, l := range f.leases() {
		if l.Checkpoint != "TRIM_HORIZON" {
			t.Fatalf("lease %s has checkpoint %q: the test needs one behind the completed records", shard, l.Checkpoint)
		}
	}
	after := payloads("after", 200)
	f.put(after)
	f.waitFor("the new records delivered", f.allDelivered(after))
	w.drain(t)

	dups := 0
	for p, n := range f.delivered() {
		if n > 1 {
			dups++
			if dups <= 3 {
				t.Errorf("%q delivered %d times", p, n)
			}
		}
	}
	if dups > 0 {
		t.Errorf("%d records delivered more than once after the leases were taken back", dups)
	}
}
