package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

// trace is an ordered record of what happened, shared by a test's fakes.
type trace struct {
	mu     sync.Mutex
	base   batch.Time
	events []string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, fmt.Sprintf(format, args...))
}

// traceLog is a metaLog that records its calls in a trace, and fails the
// call named by fail.
type traceLog struct {
	tr   *trace
	fail string
	err  error
}

func (l *traceLog) call(name string, format string, args ...any) error {
	l.tr.add(name+" "+format, args...)
	if name == l.fail {
		return l.err
	}
	return nil
}

func (l *traceLog) blockStored(_ context.Context, info batch.BlockInfo) error {
	return l.call("stored", "%v", info.ID)
}

func (l *traceLog) batchAllocated(_ context.Context, t batch.Time, blocks []batch.BlockInfo) error {
	return l.call("allocated", "%v %d blocks", t.Sub(l.tr.base), len(blocks))
}

func (l *traceLog) batchCompleted(_ context.Context, t batch.Time) error {
	return l.call("completed", "%v", t.Sub(l.tr.base))
}

// TestMetaLogOrder checks where the driver calls its metadata log: a block
// is logged before its push returns, a batch's allocation before its
// outputs run, its completion after them and before receivers are told.
func TestMetaLogOrder(t *testing.T) {
	boom := errors.New("log down")
	tests := []struct {
		name    string
		fail    string
		want    []string
		wantErr string
	}{
		{"ok", "", []string{
			"stored block-0-0", "pushed block-0-0",
			"allocated 1s 1 blocks", "output 1s [a]", "completed 1s", "receiver completed [block-0-0]",
		}, ""},
		{"store fails", "stored", []string{"stored block-0-0"},
			"stream: source 0: log block-0-0: log down"},
		{"allocation fails", "allocated", []string{"stored block-0-0", "pushed block-0-0", "allocated 1s 1 blocks"},
			"stream: batch 946684801000 ms (2000-01-01T00:00:01Z): log allocation: log down"},
		{"completion fails", "completed", []string{
			"stored block-0-0", "pushed block-0-0", "allocated 1s 1 blocks", "output 1s [a]", "completed 1s",
		}, "stream: batch 946684801000 ms (2000-01-01T00:00:01Z): log completion: log down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &trace{base: batch.TimeOf(time.Now())}
				sc, r, s := newTest[string](t, Config{})
				sc.log = &traceLog{tr: tr, fail: tt.fail, err: boom}
				r.onComplete = func(ids []batch.BlockID) { tr.add("receiver completed %v", ids) }
				ForEachBatch(s, func(_ context.Context, b *batch.Batch[string]) error {
					tr.add("output %v %v", b.Time().Sub(tr.base), b.Records())
					return nil
				})
				errc := start(t, sc)
				time.Sleep(500 * time.Millisecond)
				p := testPush[string]{recs: []string{"a"}, ack: make(chan error, 1)}
				r.in <- p
				if err := <-p.ack; err == nil {
					tr.add("pushed block-0-0")
				}
				sc.Drain()
				err := <-errc
				if gotErr := fmt.Sprint(err); (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && gotErr != tt.wantErr) {
					t.Errorf("Run = %v, want %q", err, tt.wantErr)
				}
				if tt.wantErr != "" && !errors.Is(err, boom) {
					t.Errorf("Run = %v, does not wrap %v", err, boom)
				}
				if diff := cmp.Diff(tt.want, tr.events); diff != "" {
					t.Errorf("trace (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestStopInterruptsOutput checks that Stop cancels the ctx of a running
// output and that the output's resulting error is not a failure.
func TestStopInterruptsOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, r, s := newTest[string](t, Config{})
		started := make(chan struct{})
		ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
			if b.Len() == 0 {
				return nil
			}
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
		errc := start(t, sc)
		time.Sleep(500 * time.Millisecond)
		r.push(t, "a")
		<-started
		sc.Stop()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v, want nil after Stop", err)
		}
		if len(r.completed) != 0 {
			t.Errorf("interrupted batch completed blocks %v", r.completed)
		}
	})
}
