package stream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
)

// testReceiver is a source for tests. push stores a block synchronously
// (it returns once the driver stored it); hold buffers records that are
// pushed, as one block, only when the receiver is stopped gracefully.
type testReceiver[T any] struct {
	in         chan testPush[T]
	stopc      chan struct{}
	stopOnce   sync.Once
	done       chan struct{}
	startErr   error                 // returned by Start at once, if set
	onComplete func([]batch.BlockID) // called by BlocksCompleted, if set

	mu         sync.Mutex
	started    bool
	held       []T
	pushed     map[batch.BlockID][]T
	completed  [][]batch.BlockID
	recomputes []batch.BlockID
	rt         source.Runtime[T]
}

type testPush[T any] struct {
	recs []T
	ack  chan error
}

func newTestReceiver[T any]() *testReceiver[T] {
	return &testReceiver[T]{
		in:     make(chan testPush[T]),
		stopc:  make(chan struct{}),
		done:   make(chan struct{}),
		pushed: make(map[batch.BlockID][]T),
	}
}

// push stores recs as one block and waits until the driver stored it.
func (r *testReceiver[T]) push(t *testing.T, recs ...T) {
	t.Helper()
	tp := testPush[T]{recs: recs, ack: make(chan error, 1)}
	select {
	case r.in <- tp:
	case <-r.done:
		t.Fatalf("push %v: receiver stopped", recs)
	}
	if err := <-tp.ack; err != nil {
		t.Fatalf("push %v: %v", recs, err)
	}
}

// hold keeps recs until the receiver is stopped gracefully.
func (r *testReceiver[T]) hold(recs ...T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = append(r.held, recs...)
}

func (r *testReceiver[T]) store(ctx context.Context, recs []T) error {
	info, err := r.rt.Push(ctx, source.Block[T]{Records: recs})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.pushed[info.ID] = recs
	r.mu.Unlock()
	return nil
}

func (r *testReceiver[T]) Start(ctx context.Context, rt source.Runtime[T]) error {
	r.mu.Lock()
	r.started, r.rt = true, rt
	r.mu.Unlock()
	defer close(r.done)
	if r.startErr != nil {
		return r.startErr
	}
	for {
		select {
		case tp := <-r.in:
			err := r.store(ctx, tp.recs)
			tp.ack <- err
			if err != nil {
				return err
			}
		case <-r.stopc:
			r.mu.Lock()
			held := r.held
			r.held = nil
			r.mu.Unlock()
			if len(held) == 0 {
				return nil
			}
			return r.store(ctx, held)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *testReceiver[T]) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() { close(r.stopc) })
	r.mu.Lock()
	started := r.started
	r.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errNoBlock = errors.New("test receiver: no such block")

func (r *testReceiver[T]) Recompute(_ context.Context, info batch.BlockInfo) ([]T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recomputes = append(r.recomputes, info.ID)
	recs, ok := r.pushed[info.ID]
	if !ok {
		return nil, errNoBlock
	}
	return recs, nil
}

func (r *testReceiver[T]) BlocksCompleted(_ context.Context, blocks []batch.BlockInfo) {
	ids := make([]batch.BlockID, len(blocks))
	for i, b := range blocks {
		ids[i] = b.ID
	}
	if r.onComplete != nil {
		r.onComplete(ids)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.completed = append(r.completed, ids)
}

// out is what an output saw of one batch: its index (0 for the first batch
// time of the run) and its records.
type out[T any] struct {
	Batch   int
	Records []T
}

// collector records the batches an output sees, in the order it sees them.
type collector[T any] struct {
	mu   sync.Mutex
	base batch.Time
	iv   time.Duration
	got  []out[T]
}

// collect adds an output to s that records its batches in c. Batch indexes
// count batch intervals from the first batch time after the bubble's start.
func collect[T any](s *Stream[T]) *collector[T] {
	c := &collector[T]{base: batch.TimeOf(time.Now()), iv: s.p.cfg.BatchInterval}
	ForEachBatch(s, func(_ context.Context, b *batch.Batch[T]) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.got = append(c.got, out[T]{Batch: int(b.Time().Sub(c.base)/c.iv) - 1, Records: b.Records()})
		return nil
	})
	return c
}

func (c *collector[T]) outs() []out[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got
}

// feed runs p, inside a synctest bubble, with r as one of its sources: for
// each element of steps it pushes the records as one block in the middle of
// that batch interval (nil: no block), then it drains p and returns what
// Run returned. Batch i holds step i.
func feed[T any](t *testing.T, p *Pipeline, r *testReceiver[T], steps [][]T) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(t.Context()) }()
	iv := p.cfg.BatchInterval
	time.Sleep(iv / 2)
	for i, recs := range steps {
		if i > 0 {
			time.Sleep(iv)
		}
		if recs != nil {
			r.push(t, recs...)
		}
	}
	p.Drain(context.Background())
	return <-errc
}

// newTest returns a Pipeline with cfg and a test source in it.
func newTest[T any](t *testing.T, cfg Config) (*Pipeline, *testReceiver[T], *Stream[T]) {
	t.Helper()
	p, err := NewPipeline(cfg)
	if err != nil {
		t.Fatalf("NewPipeline: %v", err)
	}
	r := newTestReceiver[T]()
	return p, r, From(p, r)
}

// inBubble runs f in a synctest bubble.
func inBubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, f)
}
