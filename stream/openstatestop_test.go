package stream

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/memory"
)

// snapshotWaitsOpener opens store's log as a log whose GetSnapshot waits
// for its ctx to be done, having closed asked, and returns its error: a
// restart reading a large snapshot, stopped meanwhile.
type snapshotWaitsOpener struct {
	store *recoverylog.MemoryStore
	asked chan struct{}
}

type snapshotWaitsLog struct {
	recovery.Log
	recovery.SnapshotStore
	asked chan struct{}
	once  *sync.Once
}

func (o *snapshotWaitsOpener) Open(ctx context.Context) (recovery.Log, error) {
	l, err := o.store.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &snapshotWaitsLog{Log: l, SnapshotStore: l.(recovery.SnapshotStore), asked: o.asked, once: &sync.Once{}}, nil
}

func (l *snapshotWaitsLog) GetSnapshot(ctx context.Context, _ string) ([]byte, error) {
	l.once.Do(func() { close(l.asked) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// stateCountPipeline builds a pipeline of cfg, with 1 s batches and
// hourly state snapshots unless cfg gives an interval, counting its words
// by key with UpdateStateByKey.
func stateCountPipeline(t *testing.T, cfg Config) (*Pipeline, *memory.Source[string]) {
	t.Helper()
	cfg.BatchInterval = time.Second
	if cfg.StateSnapshotInterval == 0 {
		cfg.StateSnapshotInterval = time.Hour
	}
	p, err := NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pairs := Map(From(p, src), func(w string) Pair[string, int] { return Pair[string, int]{Key: w, Value: 1} })
	counts := UpdateStateByKey(pairs, func(_ string, vs []int, st int, _ bool) (int, bool) { return st + len(vs), true })
	ForEachBatch(counts, func(context.Context, *batch.Batch[Pair[string, int]]) error { return nil })
	return p, src
}

// TestStopWhileRestoringState stops a restarted stateful pipeline while
// it reads its state snapshot, before it has started: Run returns nil, as
// after any Stop, not the snapshot read's context error.
func TestStopWhileRestoringState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := recoverylog.NewMemory()
		p, src := stateCountPipeline(t, Config{Recovery: store})
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(time.Second / 2)
		src.Push("a", "b", "a")
		time.Sleep(5 * time.Second)
		if err := p.Drain(t.Context()); err != nil { // ends with a snapshot of the state
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}

		opener := &snapshotWaitsOpener{store: store, asked: make(chan struct{})}
		p, _ = stateCountPipeline(t, Config{Recovery: opener})
		go func() { errc <- p.Run(t.Context()) }()
		<-opener.asked
		p.Stop()
		if err := <-errc; err != nil {
			t.Errorf("Run stopped while reading its state snapshot returned %v, want nil", err)
		}
	})
}
