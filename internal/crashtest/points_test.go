//go:build unix

package crashtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/stream"
)

// crashPoint is one deterministic crash of TestCrashPoints.
type crashPoint struct {
	name string
	// at crashes at an append; nil for a crash at a checkpoint write.
	at *appendCrash
	// afterCommit crashes after that many checkpoint commits.
	afterCommit int
	// rerun: the crash must make a batch run twice.
	rerun bool
}

// TestCrashPoints crashes an in-process pipeline exactly at each point
// between a block's log append, the checkpoint commit, the outputs and the
// completion append, restarts it on the same log and lease table, and checks
// that every record is output, duplicates only from a batch run again (the
// same records, in the same order), and that no checkpoint write ever
// passed the completed records (G4).
func TestCrashPoints(t *testing.T) {
	points := []crashPoint{
		{name: "block logged, not yet checkpointed", at: &appendCrash{kind: recoverylog.KindBlockStored, nth: 4, keep: true}},
		{name: "block append never written", at: &appendCrash{kind: recoverylog.KindBlockStored, nth: 4}},
		// A batch's blocks are logged in it (recoverylog.BlockStoredIn):
		// the block points are its allocation's.
		{name: "outputs done, completion not logged", at: &appendCrash{kind: recoverylog.KindBatchCompleted, nth: 2}, rerun: true},
		{name: "completion logged, receiver not told", at: &appendCrash{kind: recoverylog.KindBatchCompleted, nth: 2, keep: true}},
		{name: "checkpoint committed", afterCommit: 3},
	}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			runCrashPoint(t, servers.Env(t), p)
		})
	}
}

// pointRun is one in-process run of the pipeline of a crash-point test.
type pointRun struct {
	env    *localaws.Env
	name   string
	out    string
	store  *recoverylog.MemoryStore
	open   recovery.Opener
	model  *logModel
	worker string // lease owner; "" for workerID
}

// start starts the pipeline with the spy and crash given, and returns its
// Run's error channel and its Pipeline.
func (r *pointRun) start(t *testing.T, label string, c *crash, spy *ddbSpy) (<-chan error, *stream.Pipeline) {
	t.Helper()
	bf, err := openBatchFile(r.out, label, 20*time.Millisecond, &c.dead)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := newPipeline(pipelineConfig{
		aws: r.env.AWSConfig(), kinesisEndpoint: r.env.KinesisEndpoint, dynamoEndpoint: r.env.DynamoDBEndpoint,
		stream: r.name, table: r.name, tuning: childTuning{worker: r.worker}, recovery: r.open, out: bf, dynamo: spy,
	})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		err := p.Run(t.Context())
		bf.Close()
		errc <- err
	}()
	t.Cleanup(func() { p.Stop(); <-p.Done() })
	return errc, p
}

func runCrashPoint(t *testing.T, env *localaws.Env, cp crashPoint) {
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	r := &pointRun{env: env, name: localaws.UniqueName(t), out: filepath.Join(t.TempDir(), "out.txt"),
		store: recoverylog.NewMemory(), model: newLogModel()}
	r.open = r.store
	if err := env.CreateStream(ctx, r.name, 2); err != nil {
		t.Fatal(err)
	}
	prod := newProducer(env.Kinesis(), r.name)
	stopProd := make(chan struct{})
	prodErr := make(chan error, 1)
	go func() { prodErr <- prod.run(ctx, defaultPuts, stopProd) }()

	// Run 1, until the crash.
	c1 := newCrash()
	r.store.SetAppendHook(hook(r.model, c1, cp.at))
	spy1 := &ddbSpy{next: env.DynamoDB(), model: r.model, crash: c1, crashAfterCommit: cp.afterCommit}
	errc, p := r.start(t, "run-1", c1, spy1)
	select {
	case <-c1.at:
	case err := <-errc:
		t.Fatalf("run 1 ended before the crash point: %v", err)
	case <-ctx.Done():
		t.Fatal("run 1 never reached the crash point")
	}
	p.Stop()
	err1 := <-errc
	close(stopProd)
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	if err := prod.putOnce(ctx, 20); err != nil { // records only run 2 reads
		t.Fatal(err)
	}

	// Run 2, on the same log and lease table, until every record is out.
	c2 := newCrash()
	r.store.SetAppendHook(hook(r.model, c2, nil))
	spy2 := &ddbSpy{next: env.DynamoDB(), model: r.model, crash: c2}
	errc, p = r.start(t, "run-2", c2, spy2)
	put, maybe, _ := prod.snapshot()
	exited := make(chan struct{})
	var err2 error
	go func() { err2 = <-errc; close(exited) }()
	awaitRecords(t, r.out, put, exited, func() string { return fmt.Sprintf("run 2: %v", err2) })
	p.Drain(context.Background())
	<-exited
	if err2 != nil {
		t.Errorf("run 2 drained with %v", err2)
	}

	f := checkFile(t, r.out, put, maybe, false)
	report(t, fmt.Sprintf("crash at %s: %v (run 1 returned %v)", c1.what, f, err1))
	if cp.rerun && f.Rerun == 0 {
		t.Errorf("no batch ran twice: the crash point was not between the outputs and the completion")
	}
	checkSpies(t, spy1, spy2)
}

// checkSpies checks what the DynamoDB spies saw: commits happened and none
// passed the completed records (G4), whatever the recovery log.
func checkSpies(t *testing.T, spies ...*ddbSpy) {
	t.Helper()
	total := 0
	for i, s := range spies {
		commits, violations := s.stats()
		total += commits
		if len(violations) > 0 {
			t.Errorf("run %d: %d checkpoint writes past the completed records:\n%s", i+1, len(violations), strings.Join(violations, "\n"))
		}
	}
	if total == 0 {
		t.Error("no checkpoint was written: the test does not test the checkpoints")
	}
}
