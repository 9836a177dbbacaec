package stream

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
)

// logLines is a log handler's writer that keeps its lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(b))
	return len(b), nil
}

// logger returns a logger writing text lines, at INFO and above, to l.
func (l *logLines) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// matching returns the lines that contain every one of subs.
func (l *logLines) matching(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// TestHungOutputWarns runs a pipeline whose output hangs for 5 minutes:
// the driver warns that the batch is still running at 1, 2 and 4 minutes
// (not once a check, not never), says at INFO when it completes, and
// warns no more after it.
func TestHungOutputWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		p, r, s := newTest[string](t, Config{BatchInterval: time.Second,
			Logger: logs.logger()})
		release := make(chan struct{})
		ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
			if b.Len() > 0 {
				<-release
			}
			return nil
		})
		errc := start(t, p)
		r.push(t, "a")
		time.Sleep(5 * time.Minute)
		warned := logs.matching("level=WARN", "still running")
		if len(warned) != 3 {
			t.Errorf("a batch hung for 5 minutes logged %d warnings, want 3 (at 1, 2 and 4 minutes):\n%s",
				len(warned), strings.Join(logs.matching("level=WARN"), ""))
		}
		close(release)
		time.Sleep(10 * time.Minute)
		if got := logs.matching("level=WARN", "still running"); len(got) != len(warned) {
			t.Errorf("warnings after the batch completed:\n%s", strings.Join(got[len(warned):], ""))
		}
		if len(logs.matching("level=INFO", "has ended")) != 1 {
			t.Errorf("no INFO line said the batch warned about completed; lines:\n%s", strings.Join(logs.matching(), ""))
		}
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}

// TestWatcherWatches runs two watches at once on one watcher, in virtual
// time: each warns when its time is up and again each time that doubles,
// the later one's due before the earlier one's next, and neither after
// it ended.
func TestWatcherWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWatcher(clock.Real{})
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { w.run(stop); close(done) }()
		var mu sync.Mutex
		var got []string
		note := func(name string) func(time.Duration) {
			return func(waited time.Duration) {
				mu.Lock()
				got = append(got, fmt.Sprintf("%s %v", name, waited))
				mu.Unlock()
			}
		}
		endA := w.watch(time.Now(), time.Minute, note("a"))
		time.Sleep(30 * time.Second)
		endB := w.watch(time.Now(), 10*time.Second, note("b"))
		time.Sleep(100 * time.Second) // a at 60 s; b at 10, 20, 40, 80 s of its own
		if !endB() {
			t.Error("b's end says it did not warn")
		}
		time.Sleep(200 * time.Second) // a at 120, 240 s
		if !endA() {
			t.Error("a's end says it did not warn")
		}
		endC := w.watch(time.Now(), time.Minute, note("c"))
		if endC() {
			t.Error("c, ended at once, says it warned")
		}
		time.Sleep(time.Hour)
		close(stop)
		<-done
		want := []string{"b 10s", "b 20s", "a 1m0s", "b 40s", "b 1m20s", "a 2m0s", "a 4m0s"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}
	})
}

// TestHungForEachWarningNamesShard runs a ForEach whose function hangs on
// a record of one shard of two: the still-running warning names the
// output and the shard whose partition it hangs on, not the other.
func TestHungForEachWarningNamesShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logLines{}
		p, src := newMemoryPipeline(t, Config{BatchInterval: time.Second, Parallelism: 2,
			Logger: logs.logger()}, 2)
		release := make(chan struct{})
		ForEach(From(p, src), func(_ context.Context, v shardRec) error {
			if v.Shard == 1 {
				<-release
			}
			return nil
		}, Named("mail"))
		errc := start(t, p)
		for i := range 4 {
			if err := src.Push(shardRec{i % 2, i / 2}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(90 * time.Second)
		warned := logs.matching("level=WARN", "still running")
		if len(warned) != 1 {
			t.Fatalf("%d warnings, want 1:\n%s", len(warned), strings.Join(logs.matching("level=WARN"), ""))
		}
		for _, want := range []string{`output="ForEach(\"mail\") of From(source 0) (stream 0)"`, "shards=[memory/shardId-000000000001]"} {
			if !strings.Contains(warned[0], want) {
				t.Errorf("warning %q does not name %s", warned[0], want)
			}
		}
		close(release)
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
