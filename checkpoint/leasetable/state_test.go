package leasetable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/localaws"
)

// TestCoordinatorStateDir restarts a worker on the same StateDir with a
// fresh ID: the new worker takes its predecessor's leases in its first
// take cycle, on a clock that never moves (no expiry wait), and only once
// the predecessor's lock is gone.
func TestCoordinatorStateDir(t *testing.T) {
	ctx := t.Context()
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	dir := t.TempDir()
	withDir := func(c *CoordinatorConfig) { c.StateDir = dir }
	shards := shardIDs(3)

	w1 := newWorker(t, table, "w1", db, withDir)
	st1 := w1.c.openState()
	if st1 == nil {
		t.Fatal("w1: no state")
	}
	if err := w1.c.SyncShards(ctx, shards); err != nil {
		t.Fatal(err)
	}
	w1.cycle(ctx)
	if len(w1.held()) != 3 {
		t.Fatalf("w1 holds %v", w1.held())
	}

	// While w1 runs, a second worker on the directory cannot use it, and
	// w1's leases are not free (w2 does not steal, to see that alone).
	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) { withDir(c); c.MaxStealsPerCycle = -1 })
	if st := w2.c.openState(); st != nil {
		t.Fatal("w2 got the state directory while w1 holds it")
	}
	w2.cycle(ctx)
	if len(w2.held()) != 0 {
		t.Fatalf("w2 took %v from a live w1", w2.held())
	}

	// w1 dies (kill -9 releases its lock); w3 starts on the directory.
	if err := st1.close(); err != nil {
		t.Fatal(err)
	}
	w3 := newWorker(t, table, "w3", db, withDir)
	st3 := w3.c.openState()
	if st3 == nil {
		t.Fatal("w3: no state")
	}
	defer st3.close()
	w3.cycle(ctx)
	if d := cmp.Diff(ids(shards), w3.held()); d != "" {
		t.Fatalf("w3's first cycle took (-want +got):\n%s", d)
	}
	acquired, _ := w3.events()
	if d := cmp.Diff(ids(shards), acquired); d != "" {
		t.Errorf("w3 acquired (-want +got):\n%s", d)
	}
	w3.cycle(ctx)
	b, err := os.ReadFile(filepath.Join(dir, table+".workers"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "w3\n" {
		t.Errorf("state file %q once w1 owns nothing, want w3 alone", b)
	}
}
