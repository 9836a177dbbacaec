package stream

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
)

// snapshotFailsOpener opens store's log as a log whose PutSnapshot fails
// while failing is set: a disk full, a throttled DynamoDB table.
type snapshotFailsOpener struct {
	store   *recoverylog.MemoryStore
	failing *atomic.Bool
}

type snapshotFailsLog struct {
	recovery.Log
	recovery.SnapshotStore
	failing *atomic.Bool
}

func (o *snapshotFailsOpener) Open(ctx context.Context) (recovery.Log, error) {
	l, err := o.store.Open(ctx)
	if err != nil {
		return nil, err
	}
	return &snapshotFailsLog{Log: l, SnapshotStore: l.(recovery.SnapshotStore), failing: o.failing}, nil
}

func (l *snapshotFailsLog) PutSnapshot(ctx context.Context, t batch.Time, data []byte) (string, error) {
	if l.failing.Load() {
		return "", errors.New("no space left on device")
	}
	return l.SnapshotStore.PutSnapshot(ctx, t, data)
}

// TestSnapshotFailuresWarnOnce runs a stateful pipeline whose state
// snapshots cannot be stored for a minute of 1 s batches, each of them
// with records, so that a snapshot is tried after each: the failure is
// warned about once, with the fix, not after every batch (before: 58
// warnings), and the first snapshot stored after it is said at INFO.
func TestSnapshotFailuresWarnOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		failing := &atomic.Bool{}
		failing.Store(true)
		p, src := stateCountPipeline(t, Config{StateSnapshotInterval: 2 * time.Second,
			Recovery: &snapshotFailsOpener{store: recoverylog.NewMemory(), failing: failing}, Logger: logs.logger()})
		errc := start(t, p)
		time.Sleep(time.Second / 2)
		for range 60 {
			src.Push("a")
			time.Sleep(time.Second)
		}
		warned := logs.matching("level=WARN", "cannot store the state snapshot")
		if len(warned) != 1 {
			t.Errorf("a minute of snapshots that cannot be stored logged %d warnings, want 1:\n%s", len(warned), strings.Join(warned, ""))
		}
		for _, w := range warned {
			if !strings.Contains(w, "fix=") {
				t.Errorf("the warning names no fix: %s", w)
			}
		}
		failing.Store(false)
		for range 3 {
			src.Push("a")
			time.Sleep(time.Second)
		}
		if again := logs.matching("level=INFO", "state snapshot stored again"); len(again) != 1 {
			t.Errorf("%d lines say the snapshots are stored again, want 1", len(again))
		}
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
