package checkpointer

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestRemoveWithFailedFinalEndsStreak: a shard handed back during an
// outage, whose last commit (Remove with a final Committer) fails, commits
// no more: its streak ends, so that the others committing again log the
// outage's end, and the next outage is warned about. Before, it held the
// streak open until the shard was forgotten (10 minutes later, in
// source/kinesis): no INFO, and a new outage meanwhile at DEBUG alone.
func TestRemoveWithFailedFinalEndsStreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const a, b = "shardId-000000000000", "shardId-000000000001"
		l := newLatestSeq()
		logs := &syncBuffer{}
		cp, err := New(Config{Interval: testInterval, Latest: l.get, CommitBackoff: time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		r, setDown := downRecorder()
		for _, s := range []string{a, b} {
			l.set(s, "100")
			if err := cp.Register(s, r, ""); err != nil {
				t.Fatal(err)
			}
		}
		stop := startRun(t, cp)
		defer func() { _ = stop() }()
		for cp.Stats().Failures < 2 {
			time.Sleep(testInterval)
			synctest.Wait()
		}
		if err := cp.Remove(t.Context(), a, r); err == nil {
			t.Fatal("Remove's last commit succeeded during the outage; the test needs it to fail")
		}
		setDown(false)
		for cp.Stats().Commits < 1 {
			time.Sleep(testInterval)
			synctest.Wait()
		}
		if c := strings.Count(logs.String(), "commits succeed again\""); c != 1 {
			t.Errorf("the outage's end logged %d INFO lines, want 1:\n%s", c, logs)
		}
	})
}
