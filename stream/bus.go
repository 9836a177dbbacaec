package stream

import "sync"

// bus delivers listener events, in the order they were posted, on a
// goroutine of its own, as Spark's listener bus does: a slow Listener never
// holds up a batch, and a Listener may call any method of the Pipeline,
// Drain included, without waiting for itself. The queue is unbounded: an
// event is a few words, and there are a handful per batch.
type bus struct {
	listeners []Listener

	mu     sync.Mutex
	queue  []func(Listener)
	wake   chan struct{} // 1 slot: events were posted, or close was called
	closed bool
	done   chan struct{} // closed by run once every event is delivered after close
}

// newBus returns a bus for ls; run must be called (in its own goroutine)
// unless ls is empty.
func newBus(ls []Listener) *bus {
	return &bus{listeners: ls, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// post queues an event for every listener. It never blocks.
func (b *bus) post(f func(Listener)) {
	if len(b.listeners) == 0 {
		return
	}
	b.mu.Lock()
	b.queue = append(b.queue, f)
	b.mu.Unlock()
	b.signal()
}

func (b *bus) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// run delivers the queued events until close was called and every event
// posted before it is delivered; then it closes done.
func (b *bus) run() {
	defer close(b.done)
	for range b.wake {
		b.mu.Lock()
		q, closed := b.queue, b.closed
		b.queue = nil
		b.mu.Unlock()
		for _, f := range q {
			for _, l := range b.listeners {
				f(l)
			}
		}
		if closed {
			b.mu.Lock()
			rest := len(b.queue)
			b.mu.Unlock()
			if rest == 0 {
				return
			}
			b.signal()
		}
	}
}

// close asks run to return once the events posted so far are delivered,
// and waits for it. Events posted after close are delivered too if run has
// not returned yet, and dropped otherwise: nothing posts after the engine
// has ended.
func (b *bus) close() {
	if len(b.listeners) == 0 {
		return
	}
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
	<-b.done
}
