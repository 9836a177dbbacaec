package lease

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

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
	st1 := w1.c.openState(ctx)
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
	// The warning it logs says what to do.
	var logs syncBuf
	w2 := newWorker(t, table, "w2", db, func(c *CoordinatorConfig) {
		withDir(c)
		c.MaxStealsPerCycle = -1
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	res := openStateWaiting(t, w2)
	w2.clk.Advance(testLease)
	if st := <-res; st != nil {
		t.Fatal("w2 got the state directory while w1 holds it")
	}
	if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, `fix="give each worker a Leases.StateDir of its own`) {
		t.Errorf("w2's log, want a warning naming the fix:\n%s", got)
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
	st3 := w3.c.openState(ctx)
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

// openStateIn opens the worker state of table t in dir for worker me.
func openStateIn(dir, me string) (*workerState, []string, error) {
	return openWorkerState(dir, 0, "t", me)
}

// plantVictim returns the path of a file outside any state directory
// holding content, and a check that it still holds exactly that.
func plantVictim(t *testing.T, content string) (string, func()) {
	t.Helper()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return target, func() {
		t.Helper()
		if b, err := os.ReadFile(target); err != nil || string(b) != content {
			t.Errorf("the symlink's target holds %q, %v; want %q", b, err, content)
		}
	}
}

// A workers file planted as a symbolic link (to a list naming a live
// worker) is refused: its workers' leases must not be taken at once.
func TestWorkerStateRefusesSymlinkedWorkers(t *testing.T) {
	dir := t.TempDir()
	target, untouched := plantVictim(t, "live\n")
	if err := os.Symlink(target, filepath.Join(dir, "t.workers")); err != nil {
		t.Fatal(err)
	}
	st, preds, err := openStateIn(dir, "me")
	if err == nil {
		st.close()
	}
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("open with a symlinked workers file: got %v (earlier workers %v), want a symbolic link refused", err, preds)
	}
	untouched()
}

// Symbolic links planted at the lock's name and the workers file's former
// temporary name write nothing through them.
func TestWorkerStateDoesNotFollowSymlinks(t *testing.T) {
	t.Run("lock", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "victim")
		if err := os.Symlink(target, filepath.Join(dir, "t.lock")); err != nil {
			t.Fatal(err)
		}
		if st, _, err := openStateIn(dir, "me"); err == nil {
			st.close()
			t.Error("open with a symlinked lock file: nil error")
		}
		if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the symlink's target was created: %v", err)
		}
	})
	t.Run("workers.tmp", func(t *testing.T) {
		dir := t.TempDir()
		target, untouched := plantVictim(t, "victim")
		if err := os.Symlink(target, filepath.Join(dir, "t.workers.tmp")); err != nil {
			t.Fatal(err)
		}
		st, _, err := openStateIn(dir, "me")
		if err != nil {
			t.Fatal(err)
		}
		st.close()
		untouched()
		b, err := os.ReadFile(filepath.Join(dir, "t.workers"))
		if err != nil || string(b) != "me\n" {
			t.Errorf("workers file %q, %v; want me alone", b, err)
		}
	})
}

// A state directory that others can write is refused, naming the fix; a
// new one is 0700 with 0600 files.
func TestWorkerStateModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no file modes on Windows")
	}
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if st, _, err := openStateIn(open, "me"); err == nil || !strings.Contains(err.Error(), "chmod go-w "+open) {
		if st != nil {
			st.close()
		}
		t.Errorf("open of a directory of mode 0777: got %v, want an error naming chmod go-w", err)
	}

	dir := filepath.Join(t.TempDir(), "state")
	st, _, err := openStateIn(dir, "me")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: mode %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	for _, name := range []string{"t.lock", "t.workers"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", name, fi.Mode().Perm(), err)
		}
	}
}

// openStateWaiting calls w's openState, which waits for the state
// directory's lock, and returns a channel of its result once it waits on
// w's clock; it fails t if openState returned without waiting.
func openStateWaiting(t *testing.T, w *worker) <-chan *workerState {
	t.Helper()
	res := make(chan *workerState, 1)
	go func() { res <- w.c.openState(t.Context()) }()
	waiting := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { waiting <- w.clk.WaitForWaiters(ctx, 1) }()
	select {
	case st := <-res:
		if st != nil {
			st.close()
		}
		t.Fatal("openState returned at once while another worker held the state directory, without waiting for it to exit")
	case err := <-waiting:
		if err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// TestStateDirWaitsForAnExitingPredecessor checks, on the manual clock,
// that a worker whose state directory another worker still holds, as a
// predecessor that is exiting does, waits for it (logged at WARN) up to
// LeaseDuration, after which the predecessor's leases would expire anyway:
// it did without the state at once, so a restart racing its predecessor's
// exit waited LeaseDuration for the leases it could have taken back.
func TestStateDirWaitsForAnExitingPredecessor(t *testing.T) {
	db := servers.Env(t).DynamoDB()
	table := localaws.UniqueName(t)
	dir := t.TempDir()
	var logs syncBuf
	withDir := func(c *CoordinatorConfig) {
		c.StateDir = dir
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}

	w1 := newWorker(t, table, "w1", db, withDir)
	st1 := w1.c.openState(t.Context())
	if st1 == nil {
		t.Fatal("w1: no state")
	}

	// w1 exits half a second into w2's wait: w2 gets the state, and
	// knows w1 is gone.
	w2 := newWorker(t, table, "w2", db, withDir)
	res := openStateWaiting(t, w2)
	if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "waiting for it to exit") {
		t.Errorf("the wait was not logged at WARN:\n%s", got)
	}
	if err := st1.close(); err != nil {
		t.Fatal(err)
	}
	w2.clk.Advance(500 * time.Millisecond)
	st2 := <-res
	if st2 == nil {
		t.Fatal("w2: no state once w1 exited")
	}
	if !w2.c.dead["w1"] {
		t.Errorf("w2 does not know w1 is gone: dead %v", w2.c.dead)
	}

	// w2 does not exit: w3 gives up after LeaseDuration and does without.
	w3 := newWorker(t, table, "w3", db, withDir)
	res = openStateWaiting(t, w3)
	w3.clk.Advance(testLease)
	if st3 := <-res; st3 != nil {
		t.Fatal("w3 got the state directory while w2 holds it")
	}
	st2.close()
}
