//go:build unix

package crashtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// envState, set in a child, is the path prefix of the state files: the
// child then keeps a running count per key with UpdateStateByKey and with
// MapWithState, and writes each after every batch to <prefix>.ubk and
// <prefix>.mws; it marks with <prefix>.snap.<pid>.<n> the time it spends
// in its n-th snapshot write and with <prefix>.restored.<pid> that it
// loaded a snapshot, so that the parent can kill it there.
const envState = "WEIR_CRASHTEST_STATE"

// stateKeys is the number of keys of the state test: record ID mod it.
const stateKeys = 7

// stateSnapshotEvery is the state children's snapshot interval: short,
// so that kills land in and around snapshots and replays are short.
const stateSnapshotEvery = 3 * batchInterval

// markWindow widens the moments the parent kills a state child in: spent
// in a snapshot write (before and after the real one), and after loading a
// snapshot, before the replay. It is the test's input (where the kill
// lands), not a wait for a condition.
const markWindow = 30 * time.Millisecond

func stateKey(id int64) string { return "k" + strconv.FormatInt(id%stateKeys, 10) }

// addState adds the state operators and their outputs to the child's
// pipeline; prefix is envState's value.
func addState(recs *stream.Stream[kinesis.Record], prefix string) {
	pairs := stream.Map(recs, func(r kinesis.Record) stream.Pair[string, int64] {
		id, _ := strconv.ParseInt(string(r.Data), 10, 64)
		return stream.Pair[string, int64]{Key: stateKey(id), Value: 1}
	})
	counts := stream.UpdateStateByKey(pairs, func(_ string, vs []int64, st int64, _ bool) (int64, bool) {
		return st + int64(len(vs)), true
	})
	_, mws := stream.MapWithState(pairs, func(_ string, v int64, st *stream.State[int64]) (struct{}, bool) {
		st.Update(st.Get() + v)
		return struct{}{}, false
	})
	stream.ForEachBatch(counts, stateWriter(prefix+".ubk"), stream.Named("ubk"))
	stream.ForEachBatch(mws, stateWriter(prefix+".mws"), stream.Named("mws"))
}

// stateWriter returns an output that replaces the file at path with the
// batch's pairs, "key value" lines in key order, atomically.
func stateWriter(path string) func(context.Context, *batch.Batch[stream.Pair[string, int64]]) error {
	return func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		m := map[string]int64{}
		for kv := range b.All() {
			m[kv.Key] = kv.Value
		}
		var sb strings.Builder
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(&sb, "%s %d\n", k, m[k])
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(sb.String()), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	}
}

func readState(path string) (map[string]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for l := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSpace(l), " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: line %q", path, l)
		}
		m[k] = n
	}
	return m, nil
}

// stateOpener opens the child's log through the G4 model and marks the
// snapshot writes and loads (see envState).
type stateOpener struct {
	inner  modelOpener
	prefix string
}

func (o stateOpener) Open(ctx context.Context) (recovery.Log, error) {
	l, err := o.inner.Open(ctx)
	if err != nil {
		return nil, err
	}
	ss, ok := l.(modelLog).Log.(recovery.SnapshotStore)
	if !ok {
		return nil, errors.Join(fmt.Errorf("%T keeps no snapshots", l.(modelLog).Log), l.Close())
	}
	pid := strconv.Itoa(os.Getpid())
	return &stateLog{Log: l, ss: ss, snap: o.prefix + ".snap." + pid, restored: o.prefix + ".restored." + pid}, nil
}

type stateLog struct {
	recovery.Log
	ss             recovery.SnapshotStore
	snap, restored string
	puts           int // PutSnapshot calls; the driver makes them from one goroutine
}

func (l *stateLog) PutSnapshot(ctx context.Context, t batch.Time, data []byte) (string, error) {
	l.puts++
	mark := l.snap + "." + strconv.Itoa(l.puts)
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		return "", err
	}
	time.Sleep(markWindow)
	ref, err := l.ss.PutSnapshot(ctx, t, data)
	time.Sleep(markWindow)
	return ref, errors.Join(err, os.Remove(mark))
}

func (l *stateLog) PruneSnapshots(ctx context.Context, t batch.Time, ref string) error {
	return l.ss.PruneSnapshots(ctx, t, ref)
}

func (l *stateLog) GetSnapshot(ctx context.Context, ref string) ([]byte, error) {
	data, err := l.ss.GetSnapshot(ctx, ref)
	if err == nil {
		err = os.WriteFile(l.restored, nil, 0o644)
		time.Sleep(markWindow)
	}
	return data, err
}

// awaitMark polls, often, until the child has created the mark file
// <prefix>.<what>.<pid><suffix>, failing the test after waitLimit or if it
// exits.
func (h *harness) awaitMark(c *child, prefix, what, suffix string) {
	h.t.Helper()
	path := prefix + "." + what + "." + strconv.Itoa(c.cmd.Process.Pid) + suffix
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-tick.C:
		case <-c.exited:
			h.t.Fatalf("child %d exited before marking %s: %v\n%s", c.n, what, c.err, c.tail())
		case <-deadline.C:
			h.t.Fatalf("child %d did not mark %s within %v\n%s", c.n, what, waitLimit, c.tail())
		}
	}
}

// hasSnapshot reports whether the log of the (dead) children holds a
// snapshot that a restart loads.
func (h *harness) hasSnapshot() bool {
	h.t.Helper()
	l, err := recoverylog.Open(h.t.Context(), logOpener(h.env, h.shared, h.logDir, h.table, h.tuning.worker, h.tuning.attempt, nil), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer l.Close()
	st, err := recoverylog.Load(h.t.Context(), l)
	if err != nil {
		h.t.Fatal(err)
	}
	return st.Snapshot != nil && st.Snapshot.Ref != ""
}

// TestCrashTortureState is the torture test of state (DESIGN.md, "State:
// snapshot + lineage"): the child keeps a running count per key with
// UpdateStateByKey and with MapWithState, snapshotted every three batches
// in its directory log; it is killed with SIGKILL in turn inside its
// second snapshot write (so that its first is current), right after
// loading a snapshot (before or during the replay of the batches after
// it) and at a random moment, and restarted each time. After the last child drained, both counts must exactly equal
// the truth: the count per key of the distinct records the pipeline
// delivered (which must be every record put, G1). A count too high is an
// update applied twice, too low one missed. The output and the log are
// checked as in TestCrashTorture.
func TestCrashTortureState(t *testing.T) { tortureState(t, false) }

// TestCrashTortureStateDynamoLog is TestCrashTortureState with the
// recovery log, and so the snapshots, in DynamoDB (chunked items).
func TestCrashTortureStateDynamoLog(t *testing.T) { tortureState(t, true) }

func tortureState(t *testing.T, shared bool) {
	kills, seed, rng := tortureSchedule(t)
	start := time.Now()
	env := localaws.ForTest(t, localaws.Options{Kinesis: true, DynamoDB: true, DataDir: t.TempDir()})
	h := newHarness(t, env, 2)
	h.state = filepath.Join(h.dir, "state")
	h.shared = shared
	var inSnapshot, afterRestore, random int
	restoreNext := false
	f := h.torture(kills, func(i int, c *child) {
		switch {
		case restoreNext:
			h.awaitMark(c, h.state, "restored", "")
			c.kill(0)
			afterRestore++
		case i%3 == 0:
			h.awaitMark(c, h.state, "snap", ".2")
			c.kill(0)
			inSnapshot++
		default:
			c.kill(minKillDelay + time.Duration(rng.Int64N(int64(maxKillDelay-minKillDelay))))
			random++
		}
		restoreNext = !restoreNext && h.hasSnapshot()
	})

	seen := map[int64]bool{}
	if _, err := scanRecords(h.out, 0, seen); err != nil {
		t.Fatal(err)
	}
	truth := map[string]int64{}
	for id := range seen {
		truth[stateKey(id)]++
	}
	for _, op := range []string{"ubk", "mws"} {
		got, err := readState(h.state + "." + op)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(truth, got); diff != "" {
			t.Errorf("%s: final state (-truth +got):\n%s", map[string]string{"ubk": "UpdateStateByKey", "mws": "MapWithState"}[op], diff)
		}
	}
	report(t, fmt.Sprintf("state torture (shared log %v): %d kills (%d in a snapshot write, %d after a snapshot load, %d random), seed %d: %v; took %v",
		shared, kills, inSnapshot, afterRestore, random, seed, f, time.Since(start).Round(time.Millisecond)))
	if kills >= 2 && afterRestore == 0 {
		t.Errorf("no kill landed after a snapshot load: the replay was not tested")
	}
}
