package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
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

func (l *traceLog) blockStored(_ context.Context, info batch.BlockInfo, t batch.Time) error {
	return l.call("stored", "%v in %v", info.ID, t.Sub(l.tr.base))
}

func (l *traceLog) batchAllocated(_ context.Context, t batch.Time, blocks []batch.BlockInfo, logged bool) error {
	return l.call("allocated", "%v %d blocks logged %t", t.Sub(l.tr.base), len(blocks), logged)
}

func (l *traceLog) batchCompleted(_ context.Context, t batch.Time) error {
	return l.call("completed", "%v", t.Sub(l.tr.base))
}

func (l *traceLog) batchSkipped(_ context.Context, t batch.Time) error {
	return l.call("skipped", "%v", t.Sub(l.tr.base))
}

func (l *traceLog) emptyRun(_ context.Context, t batch.Time, every time.Duration) error {
	return l.call("empty run", "%v every %v", t.Sub(l.tr.base), every)
}

func (l *traceLog) runCompleted(batch.Time) {}

func (l *traceLog) shardFinished(_ context.Context, stream, shard string) error {
	return l.call("finished", "%s/%s", stream, shard)
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
			"stored block-0-0 in 1s", "pushed block-0-0",
			"allocated 1s 1 blocks logged true", "output 1s [a]", "completed 1s", "receiver completed [block-0-0]",
		}, ""},
		{"store fails", "stored", []string{"stored block-0-0 in 1s"},
			"stream: source 0: log block-0-0: log down"},
		{"allocation fails", "allocated", []string{"stored block-0-0 in 1s", "pushed block-0-0", "allocated 1s 1 blocks logged true"},
			"stream: batch 946684801000 ms (2000-01-01T00:00:01Z): log allocation: log down"},
		{"completion fails", "completed", []string{
			"stored block-0-0 in 1s", "pushed block-0-0", "allocated 1s 1 blocks logged true", "output 1s [a]", "completed 1s",
		}, "stream: batch 946684801000 ms (2000-01-01T00:00:01Z): log completion: log down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &trace{base: batch.TimeOf(time.Now())}
				p, r, s := newTest[string](t, Config{})
				p.log = &traceLog{tr: tr, fail: tt.fail, err: boom}
				r.onComplete = func(ids []batch.BlockID) { tr.add("receiver completed %v", ids) }
				ForEachBatch(s, func(_ context.Context, b *batch.Batch[string]) error {
					tr.add("output %v %v", b.Time().Sub(tr.base), b.Records())
					return nil
				})
				errc := start(t, p)
				time.Sleep(500 * time.Millisecond)
				tp := testPush[string]{recs: []string{"a"}, ack: make(chan error, 1)}
				r.in <- tp
				if err := <-tp.ack; err == nil {
					tr.add("pushed block-0-0")
				}
				p.Drain(context.Background())
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
		p, r, s := newTest[string](t, Config{})
		started := make(chan struct{})
		ForEachBatch(s, func(ctx context.Context, b *batch.Batch[string]) error {
			if b.Len() == 0 {
				return nil
			}
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
		errc := start(t, p)
		time.Sleep(500 * time.Millisecond)
		r.push(t, "a")
		<-started
		p.Stop()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v, want nil after Stop", err)
		}
		if len(r.completed) != 0 {
			t.Errorf("interrupted batch completed blocks %v", r.completed)
		}
	})
}

// faultyLog is a recovery.Log that counts its calls and fails the ones
// named by failAppend and failCompact.
type faultyLog struct {
	appends, compacts       int
	failAppend, failCompact error
}

func (l *faultyLog) Append(context.Context, ...[]byte) error {
	l.appends++
	return l.failAppend
}

func (l *faultyLog) Read(context.Context) ([][]byte, error) { return nil, nil }

func (l *faultyLog) Replace(context.Context, [][]byte) error {
	l.compacts++
	return l.failCompact
}

func (l *faultyLog) Close() error { return nil }

// TestRecoveryLogFailureIsFatal checks that the first failed append or
// compaction is reported through fail once, and that every later call
// returns it without touching the log, whose state is unknown.
func TestRecoveryLogFailureIsFatal(t *testing.T) {
	boom := errors.New("disk gone")
	tests := []struct {
		name               string
		log                *faultyLog
		wantCompleteErr    bool // whether the batchCompleted that hits the failure fails
		wantAppends        int
		wantCompacts       int
		wantFailureMessage string
	}{
		{"append fails", &faultyLog{failAppend: boom}, true, 1, 0,
			"recovery log: append complete 1000 ms (1970-01-01T00:00:01Z): disk gone"},
		{"compaction fails", &faultyLog{failCompact: boom}, false, 1, 1,
			"recovery log: compact after batch 1000 ms (1970-01-01T00:00:01Z): disk gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failures []error
			l := &recoveryLog{log: recoverylog.Wrap(tt.log, nil), compactEvery: 1, fail: func(err error) { failures = append(failures, err) }}
			err := l.batchCompleted(t.Context(), 1000)
			if (err != nil) != tt.wantCompleteErr {
				t.Errorf("batchCompleted = %v, want error %t", err, tt.wantCompleteErr)
			}
			for range 2 {
				if err := l.blockStored(t.Context(), batch.BlockInfo{Count: 1}, 0); !errors.Is(err, boom) {
					t.Errorf("blockStored after the failure = %v, want it to wrap %v", err, boom)
				}
			}
			if tt.log.appends != tt.wantAppends || tt.log.compacts != tt.wantCompacts {
				t.Errorf("log calls: %d appends, %d compactions; want %d, %d",
					tt.log.appends, tt.log.compacts, tt.wantAppends, tt.wantCompacts)
			}
			if len(failures) != 1 || !errors.Is(failures[0], boom) {
				t.Fatalf("fail called with %v, want once with an error wrapping %v", failures, boom)
			}
			if got := failures[0].Error(); got != tt.wantFailureMessage {
				t.Errorf("failure = %q, want %q", got, tt.wantFailureMessage)
			}
		})
	}
}

// compactFails opens its store's logs with a Replace (the driver's
// compaction) that fails with err.
type compactFails struct {
	store *recoverylog.MemoryStore
	err   error
}

func (o compactFails) Open(ctx context.Context) (recovery.Log, error) {
	l, err := o.store.Open(ctx)
	return compactFailsLog{Log: l, err: o.err}, err
}

type compactFailsLog struct {
	recovery.Log
	err error
}

func (l compactFailsLog) Replace(context.Context, [][]byte) error { return l.err }

// TestRunStopsOnFailedCompaction checks that a failed compaction, which
// fails no batch, still makes Run return its error, also when it happens
// on the last batch of a drain.
func TestRunStopsOnFailedCompaction(t *testing.T) {
	for _, drain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%t", drain), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				boom := errors.New("compaction failed")
				p, r, s := newTest[string](t, Config{Recovery: compactFails{store: recoverylog.NewMemory(), err: boom}, CompactEvery: 1})
				c := collect(s)
				errc := start(t, p)
				time.Sleep(500 * time.Millisecond)
				r.push(t, "a")
				if drain {
					p.Drain(context.Background())
				}
				if err := <-errc; !errors.Is(err, boom) {
					t.Fatalf("Run = %v, want an error wrapping %v", err, boom)
				}
				if diff := cmp.Diff([]out[string]{{0, []string{"a"}}}, c.outs()); diff != "" {
					t.Errorf("batches (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestAllocationOfManyBlocks checks that a batch of blocks logged without
// its time (those pushed while a restart's recovered batches queue) is
// allocated in entries a DynamoDB log can store, however many blocks it
// holds: a single allocation entry naming 20,000 blocks takes over 500 KB,
// more than an item holds, which failed the Run at every restart. The log
// recovers the batch with every block, in order.
func TestAllocationOfManyBlocks(t *testing.T) {
	const n = 20000
	store := recoverylog.NewMemory()
	l, err := recoverylog.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rl := &recoveryLog{log: l, compactEvery: DefaultCompactEvery}
	blocks := make([]batch.BlockInfo, n)
	for i := range blocks {
		blocks[i] = batch.BlockInfo{ID: batch.BlockID{Seq: uint64(i)}, Count: 1,
			Ranges: []batch.SeqRange{{Stream: "s", Shard: "shardId-000000000000", First: fmt.Sprint(i + 1), Last: fmt.Sprint(i + 1), Count: 1}}}
		if err := rl.blockStored(t.Context(), blocks[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := rl.batchAllocated(t.Context(), 5000, blocks, false); err != nil {
		t.Fatal(err)
	}
	for _, e := range store.Entries() {
		b, err := recoverylog.EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 380<<10 { // dynamolog.MaxEntrySize
			t.Fatalf("an entry of kind %s at %v encodes to %d bytes, more than a DynamoDB log stores in an item", e.Kind, e.Time, len(b))
		}
	}
	st, err := recoverylog.Recover(store.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Pending) != 1 || st.Pending[0].Time != 5000 || len(st.Unallocated) != 0 {
		t.Fatalf("recovered %d pending batches, %d unallocated blocks; want the batch at 5000 and none", len(st.Pending), len(st.Unallocated))
	}
	if !slices.Equal(st.Pending[0].IDs(), recoverylog.PendingBatch{Blocks: blocks}.IDs()) {
		t.Fatalf("the recovered batch holds %d blocks, not the %d allocated in order", len(st.Pending[0].Blocks), n)
	}
}
