package stream

import (
	"context"
	"errors"
	"fmt"
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
// hourly state snapshots, counting its words by key with UpdateStateByKey.
func stateCountPipeline(t *testing.T, cfg Config) (*Pipeline, *memory.Source[string]) {
	t.Helper()
	cfg.BatchInterval, cfg.StateSnapshotInterval = time.Second, time.Hour
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

// restartReadingSnapshot runs stateCountPipeline on a log until it has
// snapshotted its state, then runs it again from that log, and stops it
// with stop once it has asked for the snapshot (which waits until
// its ctx is done), and returns when it asked and what Run returned.
func restartReadingSnapshot(t *testing.T, stop func(p *Pipeline, cancelRun context.CancelFunc)) (asked time.Time, err error) {
	t.Helper()
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
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { errc <- p.Run(ctx) }()
	<-opener.asked
	asked = time.Now()
	stop(p, cancel)
	return asked, <-errc
}

// TestStopWhileRestoringState stops a restarted stateful pipeline while
// it reads its state snapshot, before it has started: Run returns nil, as
// after any Stop, not the snapshot read's context error.
func TestStopWhileRestoringState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, err := restartReadingSnapshot(t, func(p *Pipeline, _ context.CancelFunc) { p.Stop() })
		if err != nil {
			t.Errorf("Run stopped while reading its state snapshot returned %v, want nil", err)
		}
	})
}

// TestDrainWhileRestoringState cancels the ctx of a restarted stateful
// pipeline while it reads its state snapshot: nothing has run, so the
// drain ends the read and Run returns nil at once, rather than waiting out
// DrainTimeout for the read and then failing with a *DrainError.
func TestDrainWhileRestoringState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asked, err := restartReadingSnapshot(t, func(_ *Pipeline, cancelRun context.CancelFunc) { cancelRun() })
		if err != nil {
			t.Errorf("Run drained while reading its state snapshot returned %v, want nil", err)
		}
		if took := time.Since(asked); took != 0 {
			t.Errorf("Run returned %v after the drain was asked for while reading its state snapshot, want at once (DrainTimeout is %v)",
				took, DefaultDrainTimeout)
		}
	})
}

// openWaitsOpener is an Opener whose Open waits for its ctx to be done,
// having closed asked, then fails with err, or with ctx's error if err is
// nil: a log table still being created.
type openWaitsOpener struct {
	asked chan struct{}
	err   error
}

func (o openWaitsOpener) Open(ctx context.Context) (recovery.Log, error) {
	close(o.asked)
	<-ctx.Done()
	if o.err != nil {
		return nil, o.err
	}
	return nil, fmt.Errorf("waiting for the table: %w", ctx.Err())
}

// TestDrainWhileOpeningLog cancels Run's ctx while its recovery log opens:
// Run returns nil at once; but an Open that fails for another reason as
// the drain is asked for still fails Run with its error.
func TestDrainWhileOpeningLog(t *testing.T) {
	denied := errors.New("access denied")
	for _, openErr := range []error{nil, denied} {
		t.Run(fmt.Sprint(openErr), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opener := openWaitsOpener{asked: make(chan struct{}), err: openErr}
				p, _ := stateCountPipeline(t, Config{Recovery: opener})
				ctx, cancel := context.WithCancel(t.Context())
				errc := make(chan error, 1)
				go func() { errc <- p.Run(ctx) }()
				<-opener.asked
				start := time.Now()
				cancel()
				err := <-errc
				if openErr == nil && err != nil || openErr != nil && !errors.Is(err, openErr) {
					t.Errorf("Run drained while opening its recovery log returned %v, want %v", err, openErr)
				}
				if took := time.Since(start); took != 0 {
					t.Errorf("Run returned %v after the drain was asked for while opening its log, want at once", took)
				}
			})
		})
	}
}
