package source

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
)

// rec is a test record: the synthetic shard it was read from and its offset
// there, which is also its sequence number.
type rec struct {
	Shard string
	Off   int
}

// recsOf returns the records of shard from offset first, n of them, and
// their range.
func recsOf(shard string, first, n int) ([]rec, batch.SeqRange) {
	rs := make([]rec, n)
	for i := range rs {
		rs[i] = rec{shard, first + i}
	}
	return rs, batch.SeqRange{Stream: "test", Shard: shard, First: strconv.Itoa(first), Last: strconv.Itoa(first + n - 1), Count: n}
}

// fakeStore is a push function that keeps what it is given, in order.
type fakeStore struct {
	mu     sync.Mutex
	blocks []Block[rec]
	infos  []batch.BlockInfo
}

func (s *fakeStore) push(_ context.Context, b Block[rec]) (batch.BlockInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := batch.BlockInfo{ID: batch.BlockID{Seq: uint64(len(s.blocks))}, Ranges: b.Ranges, Count: len(b.Records)}
	s.blocks = append(s.blocks, b)
	s.infos = append(s.infos, info)
	return info, nil
}

func (s *fakeStore) snapshot() ([]Block[rec], []batch.BlockInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Block[rec](nil), s.blocks...), append([]batch.BlockInfo(nil), s.infos...)
}

// storedLog collects what onStored is given.
type storedLog struct {
	mu    sync.Mutex
	infos []batch.BlockInfo
}

func (l *storedLog) onStored(_ context.Context, info batch.BlockInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.infos = append(l.infos, info)
}

func (l *storedLog) get() []batch.BlockInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]batch.BlockInfo(nil), l.infos...)
}

// startRun runs g.Run(ctx) in a goroutine and returns a channel that gets
// its result.
func startRun[T any](ctx context.Context, g *BlockGenerator[T]) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- g.Run(ctx) }()
	return errc
}

// queued returns the number of sealed blocks not yet pushed.
func (g *BlockGenerator[T]) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// wantRecordsOfRanges returns the records a block with these ranges must
// hold, in order: each range's records, range after range.
func wantRecordsOfRanges(t *testing.T, ranges []batch.SeqRange) []rec {
	t.Helper()
	var want []rec
	for _, r := range ranges {
		first, err1 := strconv.Atoi(r.First)
		last, err2 := strconv.Atoi(r.Last)
		if err := errors.Join(err1, err2, r.Validate()); err != nil {
			t.Fatalf("bad range %v: %v", r, err)
		}
		if r.Count != last-first+1 {
			t.Errorf("range %v: count %d, spans %d offsets", r, r.Count, last-first+1)
		}
		rs, _ := recsOf(r.Shard, first, last-first+1)
		want = append(want, rs...)
	}
	return want
}

func TestGeneratorRangesMatchRecordsUnderConcurrentAdds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, log := &fakeStore{}, &storedLog{}
		g := NewBlockGenerator(Runtime[rec]{Push: st.push, BlockInterval: 10 * time.Millisecond}, log.onStored)
		g.maxQueued = 2
		ctx := t.Context()
		runErr := startRun(ctx, g)

		const adders, adds = 8, 150
		total := make([]int, adders) // records added per adder
		var wg sync.WaitGroup
		for a := range adders {
			wg.Go(func() {
				shard := fmt.Sprintf("shard-%d", a)
				rnd := rand.New(rand.NewPCG(uint64(a), 7))
				off := 1
				for range adds {
					rs, r := recsOf(shard, off, 1+rnd.IntN(5))
					if err := g.Add(ctx, rs, r); err != nil {
						t.Errorf("Add: %v", err)
						return
					}
					off += len(rs)
					time.Sleep(time.Duration(rnd.IntN(3)) * time.Millisecond)
				}
				total[a] = off - 1
			})
		}
		wg.Wait()
		if err := g.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Fatalf("Run: %v", err)
		}

		blocks, infos := st.snapshot()
		if len(blocks) < 10 {
			t.Errorf("got %d blocks, want many: sealing does not happen", len(blocks))
		}
		perShard := map[string][]rec{}
		for i, b := range blocks {
			if len(b.Records) == 0 {
				t.Errorf("block %d is empty", i)
			}
			if diff := cmp.Diff(wantRecordsOfRanges(t, b.Ranges), b.Records); diff != "" {
				t.Errorf("block %d: records do not match ranges (-want +got):\n%s", i, diff)
			}
			for _, r := range b.Records {
				perShard[r.Shard] = append(perShard[r.Shard], r)
			}
		}
		for a := range adders {
			shard := fmt.Sprintf("shard-%d", a)
			want, _ := recsOf(shard, 1, total[a])
			if diff := cmp.Diff(want, perShard[shard]); diff != "" {
				t.Errorf("%s: records not delivered exactly once in order (-want +got):\n%s", shard, diff)
			}
		}
		if diff := cmp.Diff(infos, log.get()); diff != "" {
			t.Errorf("onStored infos differ from pushed blocks (-want +got):\n%s", diff)
		}
	})
}

// addAsync calls g.Add in a goroutine and returns a channel with its result.
func addAsync(ctx context.Context, g *BlockGenerator[rec], rs []rec, ranges ...batch.SeqRange) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- g.Add(ctx, rs, ranges...) }()
	return errc
}

// returned reports whether errc holds a result, and the result.
func returned(errc <-chan error) (bool, error) {
	select {
	case err := <-errc:
		return true, err
	default:
		return false, nil
	}
}

func TestGeneratorBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval, maxQueued = 10 * time.Millisecond, 3
		st := &fakeStore{}
		release := make(chan struct{})
		var g *BlockGenerator[rec]
		push := func(ctx context.Context, b Block[rec]) (batch.BlockInfo, error) {
			if q := g.queued(); q > maxQueued {
				t.Errorf("push: %d blocks queued, bound is %d", q, maxQueued)
			}
			select {
			case <-release:
			case <-ctx.Done():
				return batch.BlockInfo{}, ctx.Err()
			}
			return st.push(ctx, b)
		}
		g = NewBlockGenerator(Runtime[rec]{Push: push, BlockInterval: interval}, nil)
		g.maxQueued = maxQueued
		ctx := t.Context()
		runErr := startRun(ctx, g)

		// Add one record per interval until an Add blocks: pushes are stuck,
		// so the queue fills up.
		off, blocked := 1, false
		var pending <-chan error
		for range 2 * maxQueued {
			rs, r := recsOf("s", off, 1)
			errc := addAsync(ctx, g, rs, r)
			synctest.Wait()
			if done, err := returned(errc); !done {
				blocked, pending = true, errc
				break
			} else if err != nil {
				t.Fatalf("Add: %v", err)
			}
			off++
			time.Sleep(interval)
			synctest.Wait()
			if q := g.queued(); q > maxQueued {
				t.Fatalf("%d blocks queued, bound is %d", q, maxQueued)
			}
		}
		if !blocked {
			t.Fatal("Add never blocked while pushes were stuck")
		}
		if q := g.queued(); q != maxQueued {
			t.Errorf("queued blocks while Add is blocked: got %d, want %d", q, maxQueued)
		}

		// The blocked Add honours its ctx; pending used ctx, so start another.
		actx, cancel := context.WithCancel(ctx)
		rs, r := recsOf("s", off, 1)
		cancelled := addAsync(actx, g, rs, r)
		synctest.Wait()
		if done, _ := returned(cancelled); done {
			t.Fatal("second Add returned while the queue is full")
		}
		cancel()
		synctest.Wait()
		if done, err := returned(cancelled); !done || !errors.Is(err, context.Canceled) {
			t.Fatalf("Add after cancel: returned %v, err %v; want context.Canceled", done, err)
		}

		// One push completes: the first Add gets in.
		release <- struct{}{}
		synctest.Wait()
		if done, err := returned(pending); !done || err != nil {
			t.Fatalf("Add after a push completed: returned %v, err %v; want nil", done, err)
		}
		off++

		// An Add blocked when Stop is called returns ErrStopped; Stop then
		// flushes everything once pushes are released.
		time.Sleep(interval) // seals the record just added: full again
		synctest.Wait()
		rs, r = recsOf("s", off, 1)
		refused := addAsync(ctx, g, rs, r)
		synctest.Wait()
		if done, _ := returned(refused); done {
			t.Fatal("Add returned while the queue is full")
		}
		stopErr := make(chan error, 1)
		go func() { stopErr <- g.Stop(ctx) }()
		synctest.Wait()
		if done, err := returned(refused); !done || !errors.Is(err, ErrStopped) {
			t.Fatalf("blocked Add after Stop: returned %v, err %v; want ErrStopped", done, err)
		}
		close(release)
		if err := <-stopErr; err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Fatalf("Run: %v", err)
		}
		blocks, _ := st.snapshot()
		var got []rec
		for _, b := range blocks {
			got = append(got, b.Records...)
		}
		want, _ := recsOf("s", 1, off-1)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("delivered records (-want +got):\n%s", diff)
		}
	})
}

// TestGeneratorAddIfAsksAfterTheWait checks that AddIf asks admit only
// once the queue has room, after a wait however long, and adds nothing
// when admit then says no.
func TestGeneratorAddIfAsksAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Millisecond
		st := &fakeStore{}
		release := make(chan struct{})
		push := func(ctx context.Context, b Block[rec]) (batch.BlockInfo, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return batch.BlockInfo{}, ctx.Err()
			}
			return st.push(ctx, b)
		}
		g := NewBlockGenerator(Runtime[rec]{Push: push, BlockInterval: interval}, nil)
		g.maxQueued = 1
		ctx := t.Context()
		runErr := startRun(ctx, g)
		rs, r := recsOf("s", 1, 1)
		if err := g.Add(ctx, rs, r); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval) // sealed, its push stuck: the queue is full
		synctest.Wait()

		var asked atomic.Int64
		var admit atomic.Bool
		admit.Store(true) // what a caller asking before the wait is told
		type result struct {
			added bool
			err   error
		}
		res := make(chan result, 1)
		go func() {
			rs, r := recsOf("s", 2, 1)
			added, err := g.AddIf(ctx, func() bool { asked.Add(1); return admit.Load() }, rs, r)
			res <- result{added, err}
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := asked.Load(); n != 0 {
			t.Errorf("admit asked %d times while the queue was full, want 0", n)
		}
		admit.Store(false) // the answer changed during the wait
		release <- struct{}{}
		synctest.Wait()
		got := <-res
		if got.added || got.err != nil {
			t.Errorf("AddIf after the wait = %v, %v; want false, nil", got.added, got.err)
		}
		if n := asked.Load(); n != 1 {
			t.Errorf("admit asked %d times, want once", n)
		}
		close(release)
		if err := g.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-runErr; err != nil {
			t.Fatal(err)
		}
		blocks, _ := st.snapshot()
		var recs []rec
		for _, b := range blocks {
			recs = append(recs, b.Records...)
		}
		want, _ := recsOf("s", 1, 1)
		if diff := cmp.Diff(want, recs); diff != "" {
			t.Errorf("delivered records (-want +got):\n%s", diff)
		}
	})
}

func TestGeneratorStopFlushesPartialBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, log := &fakeStore{}, &storedLog{}
		g := NewBlockGenerator(Runtime[rec]{Push: st.push, BlockInterval: time.Hour}, log.onStored)
		ctx := t.Context()
		runErr := startRun(ctx, g)
		rs1, r1 := recsOf("a", 1, 2)
		rs2, r2 := recsOf("b", 5, 1)
		for _, add := range []struct {
			rs []rec
			r  batch.SeqRange
		}{{rs1, r1}, {rs2, r2}} {
			if err := g.Add(ctx, add.rs, add.r); err != nil {
				t.Fatalf("Add: %v", err)
			}
		}
		if err := g.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Fatalf("Run: %v", err)
		}
		blocks, infos := st.snapshot()
		want := []Block[rec]{{Ranges: []batch.SeqRange{r1, r2}, Records: append(rs1, rs2...)}}
		if diff := cmp.Diff(want, blocks); diff != "" {
			t.Errorf("pushed blocks (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(infos, log.get()); diff != "" {
			t.Errorf("onStored (-want +got):\n%s", diff)
		}
		if err := g.Add(ctx, rs1, r1); !errors.Is(err, ErrStopped) {
			t.Errorf("Add after Stop: got %v, want ErrStopped", err)
		}
		if err := g.Stop(ctx); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

func TestGeneratorDoesNotPushEmptyBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		g := NewBlockGenerator(Runtime[rec]{Push: st.push, BlockInterval: 10 * time.Millisecond}, nil)
		ctx := t.Context()
		runErr := startRun(ctx, g)
		if err := g.Add(ctx, nil, batch.SeqRange{Stream: "s", Shard: "a", First: "1", Last: "1", Count: 1}); err != nil {
			t.Fatalf("Add of no records: %v", err)
		}
		time.Sleep(time.Second) // a hundred intervals
		if err := g.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if blocks, _ := st.snapshot(); len(blocks) != 0 {
			t.Errorf("pushed %d blocks, want none: %v", len(blocks), blocks)
		}
	})
}

var errBoom = errors.New("boom")

func TestGeneratorRetriesFailedPush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, log := &fakeStore{}, &storedLog{}
		var attempts []time.Time
		push := func(ctx context.Context, b Block[rec]) (batch.BlockInfo, error) {
			attempts = append(attempts, time.Now()) // pushes are sequential
			if len(attempts) <= 2 {
				return batch.BlockInfo{}, errBoom
			}
			return st.push(ctx, b)
		}
		var reported []error
		var mu sync.Mutex
		report := func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }
		g := NewBlockGenerator(Runtime[rec]{Push: push, BlockInterval: time.Hour, ReportError: report}, log.onStored)
		ctx := t.Context()
		runErr := startRun(ctx, g)
		rs, r := recsOf("a", 1, 3)
		if err := g.Add(ctx, rs, r); err != nil {
			t.Fatalf("Add: %v", err)
		}
		if err := g.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(attempts) != 3 {
			t.Fatalf("push attempts: got %d, want 3", len(attempts))
		}
		// The waits are jittered in [w/2, w) with w = 100ms, then 200ms.
		for i, w := range []time.Duration{pushBackoffBase, 2 * pushBackoffBase} {
			if d := attempts[i+1].Sub(attempts[i]); d < w/2 || d >= w {
				t.Errorf("wait before attempt %d: %v, want in [%v, %v)", i+2, d, w/2, w)
			}
		}
		if len(reported) != 2 {
			t.Errorf("reported errors: got %d, want 2: %v", len(reported), reported)
		}
		for _, err := range reported {
			if !errors.Is(err, errBoom) {
				t.Errorf("reported error %v does not wrap the push error", err)
			}
		}
		_, infos := st.snapshot()
		if diff := cmp.Diff(infos, log.get()); diff != "" || len(infos) != 1 {
			t.Errorf("onStored must be called once, after the push succeeded (-want +got):\n%s", diff)
		}
	})
}

func TestGeneratorPushFailsForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		push := func(context.Context, Block[rec]) (batch.BlockInfo, error) {
			calls.Add(1)
			return batch.BlockInfo{}, errBoom
		}
		var reports atomic.Int32
		stored := false
		g := NewBlockGenerator(Runtime[rec]{Push: push, BlockInterval: 10 * time.Millisecond, ReportError: func(error) { reports.Add(1) }},
			func(context.Context, batch.BlockInfo) { stored = true })
		ctx := t.Context()
		runErr := startRun(ctx, g)
		rs, r := recsOf("a", 1, 1)
		if err := g.Add(ctx, rs, r); err != nil {
			t.Fatalf("Add: %v", err)
		}
		if err := <-runErr; !errors.Is(err, errBoom) {
			t.Fatalf("Run: got %v, want an error wrapping %v", err, errBoom)
		}
		if got := calls.Load(); got != pushAttempts {
			t.Errorf("push calls: got %d, want %d", got, pushAttempts)
		}
		if got := reports.Load(); got != pushAttempts-1 {
			t.Errorf("reported errors: got %d, want %d (the last one is returned, not reported)", got, pushAttempts-1)
		}
		if stored {
			t.Error("onStored called for a block whose push failed")
		}
		if err := g.Add(ctx, rs, r); !errors.Is(err, ErrStopped) || !errors.Is(err, errBoom) {
			t.Errorf("Add after Run failed: got %v, want ErrStopped wrapping the push error", err)
		}
		if err := g.Stop(ctx); !errors.Is(err, errBoom) {
			t.Errorf("Stop after Run failed: got %v, want an error wrapping the push error", err)
		}
	})
}

func TestGeneratorRunHonoursCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		push := func(ctx context.Context, _ Block[rec]) (batch.BlockInfo, error) {
			<-ctx.Done()
			return batch.BlockInfo{}, ctx.Err()
		}
		g := NewBlockGenerator(Runtime[rec]{Push: push, BlockInterval: 10 * time.Millisecond}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		runErr := startRun(ctx, g)
		rs, r := recsOf("a", 1, 1)
		if err := g.Add(ctx, rs, r); err != nil {
			t.Fatalf("Add: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the block is sealed, the push hangs
		cancel()
		if err := <-runErr; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: got %v, want context.Canceled", err)
		}
		if err := g.Run(t.Context()); err == nil {
			t.Error("second Run: got nil, want an error")
		}
		if err := g.Add(t.Context(), rs, r); !errors.Is(err, ErrStopped) {
			t.Errorf("Add after Run returned: got %v, want ErrStopped", err)
		}
	})
}

func TestGeneratorStopHonoursCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		g := NewBlockGenerator(Runtime[rec]{Push: st.push}, nil)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		// Run was never called, so Stop waits until its ctx is done.
		if err := g.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop without Run: got %v, want context.DeadlineExceeded", err)
		}
		// A Run that starts after Stop flushes and returns nil.
		if err := g.Run(t.Context()); err != nil {
			t.Fatalf("Run after Stop: %v", err)
		}
		if err := g.Stop(t.Context()); err != nil {
			t.Errorf("Stop after Run flushed: %v", err)
		}
	})
}

func TestGeneratorUsesRuntimeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		m := clock.NewManual(time.Unix(1000, 0))
		g := NewBlockGenerator(Runtime[rec]{Push: st.push, BlockInterval: time.Second, Clock: m}, nil)
		ctx := t.Context()
		runErr := startRun(ctx, g)
		rs, r := recsOf("a", 1, 1)
		if err := g.Add(ctx, rs, r); err != nil {
			t.Fatalf("Add: %v", err)
		}
		synctest.Wait()
		// Seals come 20ms before each multiple of the interval.
		m.Advance(979 * time.Millisecond)
		synctest.Wait()
		if blocks, _ := st.snapshot(); len(blocks) != 0 {
			t.Fatalf("a block was pushed before the clock reached the seal time")
		}
		m.Advance(time.Millisecond)
		synctest.Wait()
		if blocks, _ := st.snapshot(); len(blocks) != 1 {
			t.Fatalf("pushed blocks after one interval: got %d, want 1", len(blocks))
		}
		if err := g.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

func TestGeneratorInvalidRuntime(t *testing.T) {
	push := (&fakeStore{}).push
	tests := []struct {
		name string
		rt   Runtime[rec]
		want []string // each in the error
	}{
		{"nil push", Runtime[rec]{}, []string{"Push is nil"}},
		{"negative interval", Runtime[rec]{Push: push, BlockInterval: -time.Second}, []string{"BlockInterval -1s"}},
		{"budget below -1", Runtime[rec]{Push: push, MaxBufferedBytes: -2}, []string{"MaxBufferedBytes -2: must be > 0 bytes, or -1 for no limit"}},
		{"negative batch interval", Runtime[rec]{Push: push, BatchInterval: -time.Second}, []string{"BatchInterval -1s"}},
		{"all", Runtime[rec]{BlockInterval: -1, MaxBufferedBytes: -3}, []string{"Push is nil", "BlockInterval -1ns", "MaxBufferedBytes -3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewBlockGenerator(tt.rt, nil)
			err := g.Run(t.Context())
			if !errors.Is(err, ErrInvalidRuntime) {
				t.Fatalf("Run: got %v, want ErrInvalidRuntime", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			rs, r := recsOf("a", 1, 1)
			if err := g.Add(t.Context(), rs, r); !errors.Is(err, ErrStopped) {
				t.Errorf("Add: got %v, want ErrStopped", err)
			}
		})
	}
}

func TestRuntimeWithDefaults(t *testing.T) {
	m := clock.NewManual(time.Unix(0, 0))
	tests := []struct {
		name string
		in   Runtime[rec]
		want Runtime[rec]
	}{
		{"zero", Runtime[rec]{}, Runtime[rec]{BlockInterval: DefaultBlockInterval, MaxBufferedBytes: DefaultMaxBufferedBytes, Clock: clock.Real{}}},
		{"set", Runtime[rec]{Source: 2, BlockInterval: time.Second, MaxBufferedBytes: 3 << 20, Clock: m}, Runtime[rec]{Source: 2, BlockInterval: time.Second, MaxBufferedBytes: 3 << 20, Clock: m}},
		{"no limit kept", Runtime[rec]{MaxBufferedBytes: -1}, Runtime[rec]{BlockInterval: DefaultBlockInterval, MaxBufferedBytes: -1, Clock: clock.Real{}}},
		{"batch interval kept", Runtime[rec]{BatchInterval: 2 * time.Second}, Runtime[rec]{BatchInterval: 2 * time.Second, BlockInterval: DefaultBlockInterval, MaxBufferedBytes: DefaultMaxBufferedBytes, Clock: clock.Real{}}},
		{"negative kept", Runtime[rec]{BlockInterval: -1, MaxBufferedBytes: -2}, Runtime[rec]{BlockInterval: -1, MaxBufferedBytes: -2, Clock: clock.Real{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.WithDefaults()
			if got.Logger == nil || got.ReportError == nil || got.Observe == nil {
				t.Fatal("Logger, ReportError or Observe left nil")
			}
			got.ReportError(errBoom) // must not panic
			got.Observe(nil)
			if got.Clock != tt.want.Clock {
				t.Errorf("Clock: got %v, want %v", got.Clock, tt.want.Clock)
			}
			opts := cmpopts.IgnoreFields(Runtime[rec]{}, "Push", "Logger", "ReportError", "Observe", "Clock")
			if diff := cmp.Diff(tt.want, got, opts); diff != "" {
				t.Errorf("WithDefaults (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkGeneratorAdd(b *testing.B) {
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("records=%d", size), func(b *testing.B) {
			var pushed atomic.Int64
			push := func(_ context.Context, bl Block[rec]) (batch.BlockInfo, error) {
				pushed.Add(int64(len(bl.Records)))
				return batch.BlockInfo{Count: len(bl.Records)}, nil
			}
			g := NewBlockGenerator(Runtime[rec]{Push: push, BlockInterval: 10 * time.Millisecond}, nil)
			ctx := b.Context()
			runErr := startRun(ctx, g)
			var shards atomic.Int32
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rs, r := recsOf("shard-"+strconv.Itoa(int(shards.Add(1))), 1, size)
				for pb.Next() {
					if err := g.Add(ctx, rs, r); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if err := g.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := <-runErr; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(pushed.Load())/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestUntilSeal checks when the first seal comes: sealLead before the next
// multiple of the block interval since the Unix epoch, never now.
func TestUntilSeal(t *testing.T) {
	ms := time.Millisecond
	epoch := func(d time.Duration) time.Time { return time.Unix(0, 0).Add(d) }
	tests := []struct {
		now  time.Time
		iv   time.Duration
		want time.Duration
	}{
		{epoch(1000 * time.Second), time.Second, 980 * ms},          // lead 20ms
		{epoch(1000*time.Second - 20*ms), time.Second, time.Second}, // at a seal time: the next one
		{epoch(1000*time.Second - 21*ms), time.Second, ms},
		{epoch(1000*time.Second - 19*ms), time.Second, time.Second - ms},
		{epoch(5 * time.Second), 200 * ms, 180 * ms},
		{epoch(5*time.Second + 50*ms), 100 * ms, 40 * ms}, // lead 10ms
		{epoch(5 * time.Second), 10 * ms, 9 * ms},         // lead 1ms
	}
	for _, tt := range tests {
		if got := untilSeal(tt.now, tt.iv); got != tt.want {
			t.Errorf("untilSeal(%v, %v) = %v, want %v", tt.now.Sub(epoch(0)), tt.iv, got, tt.want)
		}
	}
}

// TestGeneratorSealsStayAlignedAfterALateSeal checks that a seal that
// came late (the clock jumped past it, as a busy machine's timer fires
// late) does not delay the later seals: the next one still comes sealLead
// before the next multiple of the interval, so its block is in time for
// the batch cut there.
func TestGeneratorSealsStayAlignedAfterALateSeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		m := clock.NewManual(time.Unix(1000, 0))
		g := NewBlockGenerator(Runtime[rec]{Push: st.push, BlockInterval: 200 * time.Millisecond, Clock: m}, nil)
		ctx := t.Context()
		runErr := startRun(ctx, g)
		add := func(first int) {
			t.Helper()
			rs, r := recsOf("a", first, 1)
			if err := g.Add(ctx, rs, r); err != nil {
				t.Fatalf("Add: %v", err)
			}
			synctest.Wait()
		}
		add(1)
		// The first seal is due at 180ms; it comes 50ms late.
		m.Advance(230 * time.Millisecond)
		synctest.Wait()
		if blocks, _ := st.snapshot(); len(blocks) != 1 {
			t.Fatalf("pushed blocks after the late seal: got %d, want 1", len(blocks))
		}
		add(2)
		// The next seal is due at 380ms, not 200ms after the late one.
		m.Advance(149 * time.Millisecond)
		synctest.Wait()
		if blocks, _ := st.snapshot(); len(blocks) != 1 {
			t.Fatalf("a block was pushed before the next seal time")
		}
		m.Advance(time.Millisecond)
		synctest.Wait()
		if blocks, _ := st.snapshot(); len(blocks) != 2 {
			t.Fatalf("pushed blocks at the next aligned seal time (380ms): got %d, want 2", len(blocks))
		}
		if err := g.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-runErr; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}
