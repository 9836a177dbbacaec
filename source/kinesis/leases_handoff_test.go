package kinesis_test

import (
	"testing"
	"time"

	"github.com/weirstream/weir/source/kinesis"
)

// TestLeasesStealHandsOffWithoutDuplicates has a worker join one that
// reads two shards while records keep coming, with checkpoints a minute
// apart: the joiner asks for a shard, the holder stops reading it, lets
// what it read complete, checkpoints it and hands it off, and the joiner
// reads after that checkpoint. Every record is delivered exactly once.
func TestLeasesStealHandsOffWithoutDuplicates(t *testing.T) {
	const leaseDuration = 2 * time.Second
	f := newFleet(t, 2)
	data := payloads("handoff", 3000)
	slow := func(c *kinesis.Config) { c.Leases.CheckpointInterval = time.Minute }
	w1 := f.start("w1", leaseDuration, slow)
	f.waitFor("w1 holds both leases", func() bool { return len(w1.held()) == 2 })
	f.put(data[:1000])
	f.waitFor("the first records delivered", f.allDelivered(data[:1000]))
	w2 := f.start("w2", leaseDuration, slow)
	f.put(data[1000:2000]) // while w2 asks for a shard and w1 hands it off
	f.waitFor("w2 reads a shard", func() bool { return len(w2.held()) == 1 })
	f.put(data[2000:])
	f.waitFor("every record delivered", f.allDelivered(data))
	dups := 0
	for _, n := range f.delivered() {
		dups += n - 1
	}
	if dups != 0 {
		t.Errorf("%d records of %d delivered twice over a planned hand-off, want none", dups, len(data))
	}
	if n := len(w2.records()); n == 0 {
		t.Errorf("w2 delivered nothing")
	}
	w1.drain(t)
	w2.drain(t)
}
