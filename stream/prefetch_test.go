package stream_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/stream"
)

// gatedReceiver is a receiver that delivers nothing and whose Recompute of
// a block waits until the test opens the block's gate, then returns the
// block's records ("b<seq>.<i>"), or the error set for it.
type gatedReceiver struct {
	stop     chan struct{}
	stopOnce sync.Once

	mu       sync.Mutex
	gates    map[uint64]chan struct{}
	fail     map[uint64]error
	started  []uint64 // blocks whose Recompute started, in order
	inFlight int
	most     int // the most Recompute calls at once
	pad      int // bytes each record holds after its name
}

func newGatedReceiver() *gatedReceiver {
	return &gatedReceiver{stop: make(chan struct{}), gates: map[uint64]chan struct{}{}, fail: map[uint64]error{}}
}

func (r *gatedReceiver) gate(seq uint64) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.gates[seq]
	if !ok {
		g = make(chan struct{})
		r.gates[seq] = g
	}
	return g
}

func (r *gatedReceiver) open(seqs ...uint64) {
	for _, s := range seqs {
		close(r.gate(s))
	}
}

func (r *gatedReceiver) startedSoFar() (started []uint64, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.started), r.most
}

func (r *gatedReceiver) Start(ctx context.Context, _ source.Runtime[string]) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stop:
		return nil
	}
}

func (r *gatedReceiver) Stop(context.Context) error {
	r.stopOnce.Do(func() { close(r.stop) })
	return nil
}

func (r *gatedReceiver) Recompute(ctx context.Context, info batch.BlockInfo) ([]string, error) {
	g := r.gate(info.ID.Seq)
	r.mu.Lock()
	r.started = append(r.started, info.ID.Seq)
	r.inFlight++
	r.most = max(r.most, r.inFlight)
	err := r.fail[info.ID.Seq]
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}()
	select {
	case <-g:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, info.Count)
	for i := range out {
		out[i] = fmt.Sprintf("b%d.%d", info.ID.Seq, i) + strings.Repeat(".", r.pad)
	}
	return out, nil
}

// gatedLog returns a recovery log holding blocks 0 to n-1 of source 0 (2
// records each), allocated perBatch at a time to pending batches a second
// apart, the last ones, if any, unallocated.
func gatedLog(t *testing.T, n, perBatch, batches int) *recoverylog.MemoryStore {
	t.Helper()
	store := recoverylog.NewMemory()
	l, err := recoverylog.Open(t.Context(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	var entries []recoverylog.Entry
	for seq := range n {
		rng := batch.SeqRange{Stream: "s", Shard: "a", First: fmt.Sprint(10*seq + 1), Last: fmt.Sprint(10*seq + 2), Count: 2}
		entries = append(entries, recoverylog.BlockStored(batch.BlockInfo{ID: batch.BlockID{Seq: uint64(seq)}, Ranges: []batch.SeqRange{rng}, Count: 2}))
	}
	for b := range batches {
		var ids []batch.BlockID
		for seq := b * perBatch; seq < (b+1)*perBatch; seq++ {
			ids = append(ids, batch.BlockID{Seq: uint64(seq)})
		}
		entries = append(entries, recoverylog.BatchAllocated(batch.Time(int64(b+1)*1000), ids...))
	}
	if err := l.Append(t.Context(), entries...); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return store
}

// gatedRun runs a pipeline of r with cfg whose one output keeps each
// batch's records by batch time; stop stops it and returns what Run did.
func gatedRun(t *testing.T, cfg stream.Config, r *gatedReceiver) (out map[batch.Time][]string, mu *sync.Mutex, stop func() error) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, mu = map[batch.Time][]string{}, &sync.Mutex{}
	stream.ForEachBatch(stream.From(p, r), func(_ context.Context, b *batch.Batch[string]) error {
		mu.Lock()
		defer mu.Unlock()
		if b.Len() > 0 {
			out[b.Time()] = b.Records()
		}
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	return out, mu, func() error {
		cancel()
		return <-errc
	}
}

// TestRecoveredBlocksRecomputedConcurrently restarts on a log with pending
// batches and unallocated blocks whose recomputations finish in reverse
// order: Parallelism of them run at once, never more, and every batch
// holds its blocks' records in block order, as a sequential recomputation
// gives them.
func TestRecoveredBlocksRecomputedConcurrently(t *testing.T) {
	for _, par := range []int{1, 3} {
		t.Run(fmt.Sprintf("Parallelism %d", par), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newGatedReceiver()
				out, mu, stop := gatedRun(t, stream.Config{Parallelism: par, Recovery: gatedLog(t, 8, 3, 2)}, r)
				synctest.Wait()
				started, most := r.startedSoFar()
				if most != par || len(started) != par {
					t.Errorf("Recompute calls at once: %d (of %v), want Parallelism, %d", most, started, par)
				}
				for seq := 7; seq >= 0; seq-- { // in reverse: the last started finishes first
					r.open(uint64(seq))
					synctest.Wait()
				}
				time.Sleep(3 * time.Second) // the first new batch, with the unallocated blocks
				synctest.Wait()
				if err := stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if _, most := r.startedSoFar(); most != par {
					t.Errorf("at most %d Recompute calls at once, want %d", most, par)
				}
				mu.Lock()
				defer mu.Unlock()
				want := [][]string{
					{"b0.0", "b0.1", "b1.0", "b1.1", "b2.0", "b2.1"},
					{"b3.0", "b3.1", "b4.0", "b4.1", "b5.0", "b5.1"},
					{"b6.0", "b6.1", "b7.0", "b7.1"},
				}
				var got [][]string
				for _, bt := range slices.Sorted(maps.Keys(out)) {
					got = append(got, out[bt])
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("batches (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestRecomputeAheadBounded checks that the blocks of recovered batches are
// recomputed no further ahead than the batches the runner may queue
// (maxPendingBatches past the running one). Block 0 is recomputed first:
// until a block is measured, only the first batch's blocks are recomputed
// (see TestRecomputeAheadBoundedByBytes).
func TestRecomputeAheadBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGatedReceiver()
		_, _, stop := gatedRun(t, stream.WithMaxPendingBatches(stream.Config{Parallelism: 10, Recovery: gatedLog(t, 6, 2, 3)}, 1), r)
		synctest.Wait()
		r.open(0)
		synctest.Wait()
		if started, _ := r.startedSoFar(); len(started) != 4 {
			t.Errorf("recomputing %v before the first batch ran, want the blocks of 2 batches", started)
		}
		r.open(1)
		synctest.Wait()
		if started, _ := r.startedSoFar(); len(started) != 6 {
			t.Errorf("recomputing %v after the first batch ran, want the blocks of 3 batches", started)
		}
		r.open(2, 3, 4, 5)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// TestRecomputeErrorFailsItsBatch checks that a block whose recomputation
// fails, while others are recomputed at once, fails its batch's Run with
// the receiver's error, and that no batch after it runs.
func TestRecomputeErrorFailsItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGatedReceiver()
		gone := errors.New("range gone")
		r.fail[1] = gone
		out, mu, stop := gatedRun(t, stream.Config{Parallelism: 4, Recovery: gatedLog(t, 6, 3, 2)}, r)
		synctest.Wait()
		r.open(0, 1, 2, 3, 4, 5)
		synctest.Wait()
		err := stop()
		var be *stream.BatchError
		if !errors.Is(err, gone) || !errors.As(err, &be) || be.Time != 1000 {
			t.Errorf("Run: %v, want the batch at 1000 failing with %v", err, gone)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(out) != 0 {
			t.Errorf("batches output: %v, want none", out)
		}
	})
}

// TestRecomputeAheadBoundedByBytes checks that the blocks of recovered
// batches recomputed ahead of the runner hold no more bytes than the
// source's share of MaxBufferedBytes (1 MiB here; each block holds about
// 300 KB, 3 fit), and that the blocks of the batch the runner needs are
// recomputed at once however many bytes they hold: every batch runs, with
// its records in order.
func TestRecomputeAheadBoundedByBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newGatedReceiver()
		r.pad = 150 << 10 // 2 records a block: ~300 KB
		// Batches of 1 block (0 to 5), then one of 4 blocks (6 to 9), ~1.2 MB.
		store := gatedLog(t, 10, 1, 6)
		l, err := recoverylog.Open(t.Context(), store, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(t.Context(), recoverylog.BatchAllocated(7000, batch.BlockID{Seq: 6}, batch.BlockID{Seq: 7}, batch.BlockID{Seq: 8}, batch.BlockID{Seq: 9})); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		out, mu, stop := gatedRun(t, stream.Config{Parallelism: 10, MaxBufferedBytes: 1 << 20, Recovery: store}, r)
		steps := []struct {
			open []uint64
			want []uint64 // blocks whose recomputation started, sorted
		}{
			// The first batch's block; the next waits for a measure.
			{nil, []uint64{0}},
			// The first batch ran: 3 blocks fit, not 4.
			{[]uint64{0}, []uint64{0, 1, 2, 3}},
			{[]uint64{1}, []uint64{0, 1, 2, 3, 4}},
			{[]uint64{2}, []uint64{0, 1, 2, 3, 4, 5}},
			// The first block of the last batch fits beside 4 and 5, then
			// beside 5 and 6 the second.
			{[]uint64{3}, []uint64{0, 1, 2, 3, 4, 5, 6}},
			{[]uint64{4}, []uint64{0, 1, 2, 3, 4, 5, 6, 7}},
			// The last batch is the one the runner needs: its other blocks
			// start, beyond the budget.
			{[]uint64{5}, []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		}
		for _, st := range steps {
			r.open(st.open...)
			synctest.Wait()
			if started, _ := r.startedSoFar(); !slices.Equal(slices.Sorted(slices.Values(started)), st.want) {
				t.Errorf("after opening %v: recomputing %v, want %v", st.open, started, st.want)
			}
		}
		r.open(6, 7, 8, 9)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		want := map[batch.Time][]string{7000: {"b6.0", "b6.1", "b7.0", "b7.1", "b8.0", "b8.1", "b9.0", "b9.1"}}
		for b := range 6 {
			want[batch.Time((b+1)*1000)] = []string{fmt.Sprintf("b%d.0", b), fmt.Sprintf("b%d.1", b)}
		}
		got := map[batch.Time][]string{}
		for bt, recs := range out {
			for _, rec := range recs {
				got[bt] = append(got[bt], strings.TrimRight(rec, "."))
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("batches (-want +got):\n%s", diff)
		}
	})
}

// TestReplayedBatchesRecomputedConcurrently restarts a stateful pipeline on
// a log with two batches completed after its snapshot, replayed for the
// state, and a pending one: the blocks of all three are recomputed at once,
// and the state the pending batch outputs holds each replayed record once.
func TestReplayedBatchesRecomputedConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := gatedLog(t, 6, 2, 3)
		l, err := recoverylog.Open(t.Context(), store, nil)
		if err != nil {
			t.Fatal(err)
		}
		entries := []recoverylog.Entry{recoverylog.SnapshotTaken(0, ""), recoverylog.BatchCompleted(1000), recoverylog.BatchCompleted(2000)}
		if err := l.Append(t.Context(), entries...); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{Parallelism: 6, Recovery: store, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		r := newGatedReceiver()
		pairs := stream.Map(stream.From(p, r), func(string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: "all", Value: 1} })
		counts := stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
		var (
			mu  sync.Mutex
			got = map[batch.Time]int{}
		)
		stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
			mu.Lock()
			defer mu.Unlock()
			for _, kv := range b.Records() {
				got[b.Time()] = kv.Value
			}
			return nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		synctest.Wait()
		r.open(0) // measured: the blocks of the next batches fit
		synctest.Wait()
		if _, most := r.startedSoFar(); most != 5 {
			t.Errorf("%d Recompute calls at once, want 5: blocks 1 to 5, of the 3 batches", most)
		}
		for seq := 5; seq >= 1; seq-- {
			r.open(uint64(seq))
			synctest.Wait()
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatalf("Run: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff(map[batch.Time]int{3000: 12}, got); diff != "" {
			t.Errorf("counts output (-want +got):\n%s", diff)
		}
	})
}
