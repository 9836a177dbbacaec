package stream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// hookRecorder is a hook a receiver registers with Runtime.Observe: a
// source.CompletionObserver and a source.BatchObserver.
type hookRecorder struct {
	mu        sync.Mutex
	completed [][]batch.BlockID
	batches   int
}

func (h *hookRecorder) BlocksCompleted(_ context.Context, blocks []batch.BlockInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.completed = append(h.completed, blockIDs(blocks))
}

func (h *hookRecorder) BatchCompleted(context.Context, source.BatchReport) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches++
}

func (h *hookRecorder) snapshot() ([][]batch.BlockID, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.completed, h.batches
}

// hookedReceiver is a receiver that is no observer itself: it registers
// its hook in Start, before anything else, as Runtime.Observe asks.
type hookedReceiver[T any] struct {
	*plainReceiver[T]
	hook *hookRecorder
}

// plainReceiver is a testReceiver without its BlocksCompleted method.
type plainReceiver[T any] struct{ r *testReceiver[T] }

func (p *plainReceiver[T]) Start(ctx context.Context, rt source.Runtime[T]) error {
	return p.r.Start(ctx, rt)
}

func (p *plainReceiver[T]) Stop(ctx context.Context) error { return p.r.Stop(ctx) }
func (p *plainReceiver[T]) Recompute(ctx context.Context, info batch.BlockInfo) ([]T, error) {
	return p.r.Recompute(ctx, info)
}

func (h *hookedReceiver[T]) Start(ctx context.Context, rt source.Runtime[T]) error {
	rt.Observe(h.hook)
	return h.r.Start(ctx, rt)
}

// TestObserveHooksHearCompletions checks, in virtual time, that the hooks
// a receiver registers with Runtime.Observe are told of its completed
// blocks and of every batch, as a receiver that is an observer itself is.
func TestObserveHooksHearCompletions(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		p, err := NewPipeline(Config{BatchInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		tr := newTestReceiver[int]()
		r := &hookedReceiver[int]{plainReceiver: &plainReceiver[int]{tr}, hook: &hookRecorder{}}
		ForEachBatch(From(p, r), func(context.Context, *batch.Batch[int]) error { return nil })
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(50 * time.Millisecond)
		tr.push(t, 1, 2)
		time.Sleep(100 * time.Millisecond)
		tr.push(t, 3)
		time.Sleep(100 * time.Millisecond)
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		completed, batches := r.hook.snapshot()
		if diff := cmp.Diff([][]batch.BlockID{{{Seq: 0}}, {{Seq: 1}}}, completed); diff != "" {
			t.Errorf("completed blocks (-want +got):\n%s", diff)
		}
		if batches < 2 {
			t.Errorf("%d batches reported, want at least 2", batches)
		}
	})
}

// TestObserveReportsWhatCompletedBefore checks that a hook registered
// before the receiver's first push is told of the blocks completed before
// it was registered (those of batches recovered from the log, whose run
// races the receiver's Start), and that one registered after the first
// push is told only of what completes afterwards.
func TestObserveReportsWhatCompletedBefore(t *testing.T) {
	s := &sourceState[int]{r: &plainReceiver[int]{newTestReceiver[int]()}}
	s.bind(&engine{ctx: t.Context()})
	recovered := []batch.BlockInfo{{ID: batch.BlockID{Seq: 0}}, {ID: batch.BlockID{Seq: 1}}}
	s.complete(t.Context(), recovered)

	early := &hookRecorder{}
	s.register(early)
	if got, _ := early.snapshot(); !cmp.Equal([][]batch.BlockID{{{Seq: 0}, {Seq: 1}}}, got) {
		t.Errorf("a hook registered after a recovered batch completed was told %v, want its blocks 0 and 1", got)
	}

	s.stopHolding() // the receiver's first push
	late := &hookRecorder{}
	s.register(late)
	s.complete(t.Context(), []batch.BlockInfo{{ID: batch.BlockID{Seq: 2}}})
	if got, _ := early.snapshot(); !cmp.Equal([][]batch.BlockID{{{Seq: 0}, {Seq: 1}}, {{Seq: 2}}}, got) {
		t.Errorf("early hook told %v, want blocks 0 and 1, then 2", got)
	}
	if got, _ := late.snapshot(); !cmp.Equal([][]batch.BlockID{{{Seq: 2}}}, got) {
		t.Errorf("hook registered after the first push told %v, want only block 2", got)
	}
}
