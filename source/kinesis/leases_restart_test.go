package kinesis_test

import (
	"errors"
	"io/fs"
	"os"
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

// TestLeasesKeepNoStateUnlessAsked checks that the lease state directory is
// passed explicitly: a worker with a directory recovery log and no
// Leases.StateDir keeps no lease state, in the log's directory or
// anywhere, so it never takes leases at once on the word of a folder it
// was not given. (weir once derived a "kinesis-leases" folder of a
// directory recovery log.)
func TestLeasesKeepNoStateUnlessAsked(t *testing.T) {
	f := newFleet(t, 2)
	dir := t.TempDir()
	w := f.startWith("w1", time.Hour, nil, recovery.Dir(dir))
	f.waitFor("w1 holds every lease", func() bool { return len(w.held()) == 2 })
	if _, err := os.Stat(filepath.Join(dir, "kinesis-leases")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the recovery log's directory holds a lease state folder (Stat: %v); StateDir was not set", err)
	}
	w.drain(t)
}
