package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
)

// recorder is a Listener that records events as strings, batch times as
// seconds since the bubble's start.
type recorder struct {
	mu     sync.Mutex
	base   batch.Time
	events []string
}

func newRecorder() *recorder { return &recorder{base: batch.TimeOf(time.Now())} }

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) batch(ev string, b BatchInfo) {
	r.add("%s %v: blocks=%d records=%d delay=%v took=%v err=%v", ev, b.Time.Sub(r.base), b.Blocks, b.Records, b.SchedulingDelay, b.ProcessingTime, b.Err)
}

func (r *recorder) BatchScheduled(b BatchInfo)      { r.batch("scheduled", b) }
func (r *recorder) BatchStarted(b BatchInfo)        { r.batch("started", b) }
func (r *recorder) BatchCompleted(b BatchInfo)      { r.batch("completed", b) }
func (r *recorder) ReceiverStarted(ri ReceiverInfo) { r.add("receiver %d started", ri.Source) }
func (r *recorder) ReceiverError(ri ReceiverInfo)   { r.add("receiver %d error: %v", ri.Source, ri.Err) }
func (r *recorder) ReceiverStopped(ri ReceiverInfo) {
	r.add("receiver %d stopped: %v", ri.Source, ri.Err)
}
func (r *recorder) get() []string { r.mu.Lock(); defer r.mu.Unlock(); return r.events }
func (r *recorder) only(prefix string) (out []string) {
	for _, e := range r.get() {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// start runs p.Run in a goroutine and returns a channel with its result.
func start(t *testing.T, p *Pipeline) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- p.Run(t.Context()) }()
	return errc
}

func TestListenerEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		p, r, s := newTest[string](t, Config{Listeners: []Listener{rec}})
		collect(s)
		errc := start(t, p)
		time.Sleep(500 * time.Millisecond)
		r.push(t, "a", "b")
		r.rt.ReportError(errors.New("oops"))
		time.Sleep(time.Second)
		r.push(t, "c")
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []string{
			"receiver 0 started",
			"receiver 0 error: oops",
			"scheduled 1s: blocks=1 records=2 delay=0s took=0s err=<nil>",
			"started 1s: blocks=1 records=2 delay=0s took=0s err=<nil>",
			"completed 1s: blocks=1 records=2 delay=0s took=0s err=<nil>",
			"receiver 0 stopped: <nil>",
			"scheduled 2s: blocks=1 records=1 delay=0s took=0s err=<nil>",
			"started 2s: blocks=1 records=1 delay=0s took=0s err=<nil>",
			"completed 2s: blocks=1 records=1 delay=0s took=0s err=<nil>",
		}
		if diff := cmp.Diff(want, rec.get()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
}

func TestStopAndDrain(t *testing.T) {
	tests := []struct {
		name      string
		end       func(p *Pipeline)
		want      []out[string]
		completed [][]batch.BlockID
	}{
		{"Drain processes pushed and held records", func(p *Pipeline) {
			if err := p.Drain(context.Background()); err != nil {
				t.Errorf("Drain: %v", err)
			}
		},
			[]out[string]{{0, []string{"a", "held"}}},
			[][]batch.BlockID{{{Source: 0, Seq: 0}, {Source: 0, Seq: 1}}}},
		{"Stop does not wait for them", (*Pipeline).Stop, nil, nil},
		{"Drain twice, concurrently, then Stop", func(p *Pipeline) {
			var wg sync.WaitGroup
			wg.Go(func() { p.Drain(context.Background()) })
			wg.Go(func() { p.Drain(context.Background()) })
			wg.Wait()
			p.Stop()
			p.Drain(context.Background())
		}, []out[string]{{0, []string{"a", "held"}}},
			[][]batch.BlockID{{{Source: 0, Seq: 0}, {Source: 0, Seq: 1}}}},
		{"Stop twice, concurrently, then Drain", func(p *Pipeline) {
			var wg sync.WaitGroup
			wg.Go(p.Stop)
			wg.Go(p.Stop)
			wg.Wait()
			p.Drain(context.Background())
			p.Stop()
		}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, r, s := newTest[string](t, Config{})
				c := collect(s)
				errc := start(t, p)
				time.Sleep(500 * time.Millisecond)
				r.push(t, "a")
				r.hold("held")
				tt.end(p)
				if err := <-errc; err != nil {
					t.Fatalf("Run: %v", err)
				}
				if diff := cmp.Diff(tt.want, c.outs()); diff != "" {
					t.Errorf("outputs (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.completed, r.completed); diff != "" {
					t.Errorf("completed blocks (-want +got):\n%s", diff)
				}
				if err := p.Run(t.Context()); !errors.Is(err, ErrClosed) {
					t.Errorf("second Run = %v, want ErrClosed", err)
				}
			})
		})
	}
}

func TestStopBeforeRun(t *testing.T) {
	p, _, s := newTest[string](t, Config{})
	Print(s, 1)
	p.Stop()
	p.Stop()
	if err := p.Run(t.Context()); err != nil {
		t.Errorf("Run after Stop = %v, want nil", err)
	}
	if err := p.Run(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("second Run = %v, want ErrClosed", err)
	}
	p.Drain(context.Background()) // returns at once: Run has returned
}

func TestDrainBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		c := collect(s)
		r.hold("held")
		p.Drain(context.Background())
		p.Drain(context.Background())
		if err := p.Run(t.Context()); err != nil {
			t.Errorf("Run after Drain = %v, want nil", err)
		}
		if diff := cmp.Diff([]out[string]{{0, []string{"held"}}}, c.outs()); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
	})
}

func TestRunContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		c := collect(s)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		time.Sleep(1500 * time.Millisecond)
		r.push(t, "late")
		r.hold("held")
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run = %v, want nil: a cancelled ctx drains", err)
		}
		p.Stop() // returns at once after Run ended
		want := []out[string]{{0, nil}, {1, []string{"late", "held"}}}
		if diff := cmp.Diff(want, c.outs(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
	})
}

func TestReceiverStartError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		p, r, s := newTest[string](t, Config{Listeners: []Listener{rec}})
		Print(s, 1)
		boom := errors.New("boom")
		r.startErr = boom
		err := p.Run(t.Context())
		if !errors.Is(err, boom) || err.Error() != "stream: source 0: boom" {
			t.Errorf("Run = %v, want stream: source 0: boom", err)
		}
		want := []string{"receiver 0 started", "receiver 0 error: stream: source 0: boom", "receiver 0 stopped: stream: source 0: boom"}
		if diff := cmp.Diff(want, rec.only("receiver")); diff != "" {
			t.Errorf("receiver events (-want +got):\n%s", diff)
		}
	})
}

func TestOutputErrorFailsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		p, r, s := newTest[string](t, Config{Listeners: []Listener{rec}})
		boom := errors.New("boom")
		ForEach(s, func(_ context.Context, v string) error {
			if v == "bad" {
				return boom
			}
			return nil
		})
		after := collect(s)
		err := feed(t, p, r, [][]string{{"ok"}, {"bad"}})
		want := "stream: batch 946684802000 ms (2000-01-01T00:00:02Z): output 0, ForEach of From(source 0) (stream 0): boom (" + stopFix + ")"
		if err == nil || err.Error() != want {
			t.Fatalf("Run = %v, want %s", err, want)
		}
		var be *BatchError
		if !errors.As(err, &be) || !errors.Is(err, boom) || be.Time != batch.TimeOf(time.Unix(946684802, 0)) {
			t.Errorf("Run = %#v, want a *BatchError at 2s wrapping boom", err)
		}
		if diff := cmp.Diff([]out[string]{{0, []string{"ok"}}}, after.outs()); diff != "" {
			t.Errorf("later output (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([][]batch.BlockID{{{Source: 0, Seq: 0}}}, r.completed); diff != "" {
			t.Errorf("completed (-want +got):\n%s", diff)
		}
		if got := rec.only("completed 2s"); len(got) != 1 || !strings.HasSuffix(got[0], "err="+want) {
			t.Errorf("completed event = %v, want one with err=%s", got, want)
		}
	})
}

func TestBlocksCompletedAndDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{})
		collect(s)
		errc := start(t, p)
		time.Sleep(500 * time.Millisecond)
		r.push(t, "a")
		r.push(t, "b")
		time.Sleep(time.Second)
		r.push(t, "c")
		st := p.sources[0].(*sourceState[string])
		if blocks, records := st.store.Len(); blocks != 1 || records != 1 {
			t.Errorf("store after batch 0 holds %d blocks, %d records; want 1, 1", blocks, records)
		}
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := [][]batch.BlockID{{{Source: 0, Seq: 0}, {Source: 0, Seq: 1}}, {{Source: 0, Seq: 2}}}
		if diff := cmp.Diff(want, r.completed); diff != "" {
			t.Errorf("completed (-want +got):\n%s", diff)
		}
		if blocks, _ := st.store.Len(); blocks != 0 {
			t.Errorf("store holds %d blocks after the drain, want 0", blocks)
		}
	})
}

func TestRecomputeMissingBlock(t *testing.T) {
	tests := []struct {
		name    string
		forget  bool // the receiver cannot recompute either
		want    []out[string]
		wantErr error
	}{
		{"recomputed", false, []out[string]{{0, []string{"a", "b"}}}, nil},
		{"lost", true, nil, errNoBlock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				p, r, s := newTest[string](t, Config{Listeners: []Listener{rec}})
				c := collect(s)
				errc := start(t, p)
				time.Sleep(500 * time.Millisecond)
				r.push(t, "a", "b")
				id := batch.BlockID{Source: 0, Seq: 0}
				p.sources[0].(*sourceState[string]).store.Delete(id)
				if tt.forget {
					delete(r.pushed, id)
				}
				p.Drain(context.Background())
				err := <-errc
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Run = %v, want %v", err, tt.wantErr)
				}
				if diff := cmp.Diff(tt.want, c.outs()); diff != "" {
					t.Errorf("outputs (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]batch.BlockID{id}, r.recomputes); diff != "" {
					t.Errorf("recomputed (-want +got):\n%s", diff)
				}
				if tt.forget {
					want := []string{"receiver 0 error: source 0: recompute block-0-0: test receiver: no such block"}
					if diff := cmp.Diff(want, rec.only("receiver 0 error")); diff != "" {
						t.Errorf("receiver errors (-want +got):\n%s", diff)
					}
				}
			})
		})
	}
}

// TestUnbatchedBlocksBackpressure checks that a push waits while its source
// has maxUnbatchedBlocks blocks not yet in a batch, until the next cut.
func TestUnbatchedBlocksBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r, s := newTest[string](t, Config{maxUnbatchedBlocks: 2})
		c := collect(s)
		errc := start(t, p)
		t0 := time.Now()
		time.Sleep(500 * time.Millisecond)
		r.push(t, "a")
		r.push(t, "b")
		r.push(t, "c") // waits for the cut at 1s
		if got := time.Since(t0); got != time.Second {
			t.Errorf("third push returned after %v, want 1s", got)
		}
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []out[string]{{0, []string{"a", "b"}}, {1, []string{"c"}}}
		if diff := cmp.Diff(want, c.outs()); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
	})
}

// TestPendingBatchesBackpressure checks that slow outputs delay batches
// (maxPendingBatches waiting at most) without skipping a batch time.
func TestPendingBatchesBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		p, r, s := newTest[string](t, Config{maxPendingBatches: 1, Listeners: []Listener{rec}})
		c := collect(s)
		ForEachBatch(s, func(ctx context.Context, _ *batch.Batch[string]) error {
			return clock.Sleep(ctx, clock.Real{}, 2500*time.Millisecond)
		})
		if err := feed(t, p, r, [][]string{{"a"}, {"b"}, {"c"}}); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []string{
			"started 1s: blocks=1 records=1 delay=0s took=0s err=<nil>",
			"started 2s: blocks=1 records=1 delay=1.5s took=0s err=<nil>",
			"started 3s: blocks=1 records=1 delay=3s took=0s err=<nil>",
		}
		if diff := cmp.Diff(want, rec.only("started")); diff != "" {
			t.Errorf("started events (-want +got):\n%s", diff)
		}
		wantOut := []out[string]{{0, []string{"a"}}, {1, []string{"b"}}, {2, []string{"c"}}}
		if diff := cmp.Diff(wantOut, c.outs()); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
	})
}

// TestTimerCatchesUp checks that a clock jumping several intervals yields
// one batch per interval, in order, none skipped.
func TestTimerCatchesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewManual(time.Now())
		rec := newRecorder()
		p, r, s := newTest[string](t, Config{Clock: clk, Listeners: []Listener{rec}})
		c := collect(s)
		errc := start(t, p)
		synctest.Wait()
		r.push(t, "a")
		clk.Advance(3 * time.Second)
		synctest.Wait()
		p.Stop()
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []out[string]{{0, []string{"a"}}, {1, nil}, {2, nil}}
		if diff := cmp.Diff(want, c.outs(), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
		wantEv := []string{
			"scheduled 1s: blocks=1 records=1 delay=0s took=0s err=<nil>",
			"scheduled 2s: blocks=0 records=0 delay=0s took=0s err=<nil>",
			"scheduled 3s: blocks=0 records=0 delay=0s took=0s err=<nil>",
		}
		if diff := cmp.Diff(wantEv, rec.only("scheduled")); diff != "" {
			t.Errorf("scheduled events (-want +got):\n%s", diff)
		}
	})
}

// TestGraphChangeAfterRunIsLogged checks that an output added while Run
// runs is ignored and reported at ERROR, naming the node, rather than
// dropped without a word.
func TestGraphChangeAfterRunIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out strings.Builder
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return out.Write(b)
		}), nil))
		p, _, s := newTest[string](t, Config{Logger: logger})
		collect(s)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		time.Sleep(1500 * time.Millisecond) // one batch in: Run is running
		Print(Map(s, strings.ToUpper), 1)
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(out.String(), "level=ERROR msg=\"stream: graph changed after Run") {
			t.Errorf("log:\n%s\nwant an ERROR for the output added after Run", out.String())
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
