//go:build unix

package crashtest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/recoverylog"
)

// TestCrashTakeOverByAnotherWorker is G1 in a fleet: worker A (ID "a", its
// own log) reads, checkpoints, and is
// killed with blocks stored that never completed (at the first block
// logged after its second checkpoint); it never comes back. Worker B (ID
// "b", another log) takes the shards over once A's leases expired, and
// must deliver every record: B reads after the checkpoints, and those never
// pass A's completed records. Records may come twice (at least once: A
// completed them and B read them again before the checkpoint caught up),
// but none is lost. A receiver that checkpointed A's stored records would
// be killed at its first such checkpoint (the spy's crashPastCompletion),
// and B, starting after records that only A's log names, would lose them.
func TestCrashTakeOverByAnotherWorker(t *testing.T) {
	t.Parallel()
	env := servers.Env(t)
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	name, out := localaws.UniqueName(t), filepath.Join(t.TempDir(), "out.txt")
	worker := func(id string) *pointRun {
		r := &pointRun{env: env, name: name, out: out, store: recoverylog.NewMemory(), model: newLogModel(), worker: id}
		r.open = r.store
		return r
	}
	a, b := worker("a"), worker("b")
	if err := env.CreateStream(ctx, name, 2); err != nil {
		t.Fatal(err)
	}
	prod := newProducer(env.Kinesis(), name)
	stopProd := make(chan struct{})
	prodErr := make(chan error, 1)
	go func() { prodErr <- prod.run(ctx, defaultPuts, stopProd) }()

	// Worker A, until it dies with a block logged after two checkpoints.
	ca := newCrash()
	spyA := &ddbSpy{next: env.DynamoDB(), model: a.model, crash: ca, crashPastCompletion: true}
	afterCommits := func() bool { n, _ := spyA.stats(); return n >= 2 }
	a.store.SetAppendHook(hook(a.model, ca, &appendCrash{kind: recoverylog.KindBlockStored, nth: 1, keep: true, after: afterCommits}))
	errc, p := a.start(t, "worker-a", ca, spyA)
	select {
	case <-ca.at:
	case err := <-errc:
		t.Fatalf("worker a ended before the crash point: %v", err)
	case <-ctx.Done():
		t.Fatal("worker a never reached the crash point")
	}
	p.Stop()
	errA := <-errc
	close(stopProd)
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	if err := prod.putOnce(ctx, 20); err != nil {
		t.Fatal(err)
	}
	left := uncompleted(t, a.store)
	if left == 0 {
		t.Fatal("worker a left no stored record uncompleted: the test tests nothing")
	}

	// Worker B, on its own log, until every record is out.
	cb := newCrash()
	b.store.SetAppendHook(hook(b.model, cb, nil))
	spyB := &ddbSpy{next: env.DynamoDB(), model: b.model, crash: cb}
	errc, p = b.start(t, "worker-b", cb, spyB)
	put, maybe, _ := prod.snapshot()
	exited := make(chan struct{})
	var errB error
	go func() { errB = <-errc; close(exited) }()
	awaitRecords(t, out, put, exited, func() string { return fmt.Sprintf("worker b: %v", errB) })
	p.Drain(context.Background())
	<-exited
	if errB != nil {
		t.Errorf("worker b drained with %v", errB)
	}

	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := parseOutput(string(data))
	if err != nil {
		t.Fatal(err)
	}
	f, errs := checkAtLeastOnce(tr, put, maybe)
	for _, err := range errs {
		t.Error(err)
	}
	report(t, fmt.Sprintf("take-over: worker a died at %s with %d stored records not completed (Run returned %v); %v",
		ca.what, left, errA, f))
	checkSpies(t, spyA, spyB)
}

// uncompleted returns the number of records in the blocks the log of store
// holds stored or allocated but not completed.
func uncompleted(t *testing.T, store *recoverylog.MemoryStore) int {
	t.Helper()
	l, err := recoverylog.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st, err := recoverylog.Load(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range st.Unallocated {
		n += b.Count
	}
	for _, p := range st.Pending {
		for _, b := range p.Blocks {
			n += b.Count
		}
	}
	return n
}

// checkAtLeastOnce checks a transcript of several workers, each with its
// own log, where batch times mean nothing across workers: every record put
// is in a complete run (G1), no record is unknown, and each complete run
// gives each shard's records in put (ID) order. Records in several runs are
// counted as duplicates, not errors.
func checkAtLeastOnce(tr *transcript, put, maybe map[int64]bool) (figures, []error) {
	f := figures{Put: len(put), Maybe: len(maybe), Procs: tr.procs, Runs: len(tr.runs), Torn: tr.torn}
	var errs []error
	times := map[int64]bool{}
	seen := map[int64]bool{}
	lines := 0
	for _, r := range tr.runs {
		times[r.time] = true
		if r.done != 0 {
			f.Done++
		}
		if !r.complete {
			continue
		}
		last := map[string]int64{}
		for _, x := range r.records {
			lines++
			seen[x.id] = true
			if !put[x.id] && !maybe[x.id] {
				errs = append(errs, fmt.Errorf("record %d in batch %d was never put", x.id, r.time))
			}
			if l, ok := last[x.shard]; ok && x.id <= l {
				errs = append(errs, fmt.Errorf("batch %d at line %d: shard %s: record %d after record %d: out of order", r.time, r.line, x.shard, x.id, l))
			}
			last[x.shard] = x.id
		}
	}
	f.Batches, f.Duplicates = len(times), lines-len(seen)
	var lost []int64
	for _, id := range slices.Sorted(maps.Keys(put)) {
		if !seen[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		errs = append(errs, fmt.Errorf("%d records put are in no complete batch (G1), first %v", len(lost), lost[:min(len(lost), 20)]))
	}
	return f, errs
}
