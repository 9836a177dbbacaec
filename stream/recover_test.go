package stream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
)

// TestRecoveredJob checks the job a restart makes of a batch in the
// recovery log, pending or to replay: its blocks by source, in order, and
// their counts; a block of a source the pipeline does not have is refused,
// naming the batch, the block and the sources there are.
func TestRecoveredJob(t *testing.T) {
	e := &engine{sources: make([]sourceRunner, 2)}
	blk := func(src int, seq uint64, n int) batch.BlockInfo {
		return batch.BlockInfo{ID: batch.BlockID{Source: src, Seq: seq}, Count: n}
	}
	j, err := e.recoveredJob(batch.Time(1000), []batch.BlockInfo{blk(1, 0, 3), blk(0, 0, 2), blk(1, 1, 4)})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]batch.BlockInfo{{blk(0, 0, 2)}, {blk(1, 0, 3), blk(1, 1, 4)}}
	if diff := cmp.Diff(want, j.blocks); diff != "" {
		t.Errorf("blocks by source (-want +got):\n%s", diff)
	}
	if j.time != 1000 || j.records != 9 || j.nblocks != 3 || !j.recovered || j.replay || j.inRun {
		t.Errorf("job at %v, %d records, %d blocks, recovered %v, replay %v, inRun %v; want at 1000, 9 records, 3 blocks, recovered only",
			j.time, j.records, j.nblocks, j.recovered, j.replay, j.inRun)
	}
	_, err = e.recoveredJob(batch.Time(2000), []batch.BlockInfo{blk(0, 1, 1), blk(2, 0, 1)})
	if err == nil || !strings.Contains(err.Error(), "block-2-0 of source 2, but the pipeline has 2 sources") {
		t.Errorf("a block of source 2 of 2: err = %v, want one naming the block and the 2 sources", err)
	}
}

// TestRecoveryLogStartIsLogged checks what a Run says of its recovery log:
// a first start on an empty log says so, rather than "resuming" from a last
// batch at 1970, and a restart says it resumes, with its last batch.
func TestRecoveryLogStartIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := recoverylog.NewMemory()
		for run, want := range []string{
			`level=INFO msg="stream: the recovery log is empty: starting afresh"`,
			`level=INFO msg="stream: resuming from the recovery log" pending=0 unallocated=0 last="946684801000 ms (2000-01-01T00:00:01Z)"`,
		} {
			var out lockedLog
			p, _, s := newTest[string](t, Config{Recovery: log, Logger: slog.New(slog.NewTextHandler(&out, nil))})
			collect(s)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() { errc <- p.Run(ctx) }()
			time.Sleep(1500 * time.Millisecond) // one batch, at 1s
			cancel()
			if err := <-errc; err != nil {
				t.Fatalf("Run %d = %v", run+1, err)
			}
			if got := out.String(); !strings.Contains(got, want) || strings.Contains(got, "1970") {
				t.Errorf("Run %d's log:\n%s\nwant %s, and no batch of 1970", run+1, got, want)
			}
		}
	})
}

// lockedLog is a log's output, written and read from any goroutine.
type lockedLog struct {
	mu  sync.Mutex
	out strings.Builder
}

func (l *lockedLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.Write(b)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}
