package kinesis_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
)

// TestLeasesRestartTakesThePredecessorsLeasesAtOnce kills a worker that
// has a directory recovery log and a lease state directory beside it
// (Leases.StateDir), and starts another process's worker (a fresh worker
// ID) on the same two: it takes the dead worker's leases in its first take
// cycle, proven gone by the state directory's lock, although they would
// not expire for an hour.
func TestLeasesRestartTakesThePredecessorsLeasesAtOnce(t *testing.T) {
	const leaseDuration = time.Hour // never expires during the test
	f := newFleet(t, 4)
	dir, stateDir := t.TempDir(), filepath.Join(t.TempDir(), "leases")
	withState := func(c *kinesis.Config) { c.Leases.StateDir = stateDir }
	w1 := f.startWith("w1", leaseDuration, withState, recovery.Dir(dir))
	f.waitFor("w1 holds every lease", func() bool { return len(w1.held()) == 4 })
	w1.kill()
	for shard, l := range f.leases() {
		if l.Owner != "w1" {
			t.Fatalf("after the kill, lease %s: owner %q, want w1's still", shard, l.Owner)
		}
	}
	w2 := f.startWith("w1-restarted", leaseDuration, withState, recovery.Dir(dir))
	data := payloads("after", 200)
	f.put(data)
	f.waitFor("the restarted worker holds every lease and delivers everything", func() bool {
		return len(w2.held()) == 4 && f.allDelivered(data)()
	})
	w2.drain(t)
}
