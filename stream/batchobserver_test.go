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

// observingReceiver is a test receiver that is a source.BatchObserver.
type observingReceiver[T any] struct {
	*testReceiver[T]
	mu      sync.Mutex
	reports []source.BatchReport
}

func (r *observingReceiver[T]) BatchCompleted(_ context.Context, b source.BatchReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, b)
}

// TestBatchObserver checks, in virtual time, that a receiver implementing
// source.BatchObserver hears of every batch that succeeded, with its own
// records (not another source's), the batch interval, and the batch's
// timing.
func TestBatchObserver(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		sc, err := NewPipeline(Config{BatchInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		r := &observingReceiver[int]{testReceiver: newTestReceiver[int]()}
		other := newTestReceiver[int]()
		s := Union(From(sc, r), From(sc, other))
		ForEachBatch(s, func(context.Context, *batch.Batch[int]) error {
			time.Sleep(30 * time.Millisecond) // every batch takes 30ms
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- sc.Run(t.Context()) }()
		time.Sleep(50 * time.Millisecond)
		r.push(t, 1, 2, 3)
		other.push(t, 9)
		time.Sleep(100 * time.Millisecond)
		other.push(t, 8, 7)
		time.Sleep(100 * time.Millisecond)
		sc.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.reports) < 2 {
			t.Fatalf("%d reports, want at least 2: %+v", len(r.reports), r.reports)
		}
		var got []int
		for _, b := range r.reports[:2] {
			got = append(got, b.Records)
			if b.Interval != 100*time.Millisecond || b.ProcessingTime < 30*time.Millisecond || b.Time.IsZero() {
				t.Errorf("report %+v: want Interval 100ms, ProcessingTime >= 30ms and a Time", b)
			}
		}
		if diff := cmp.Diff([]int{3, 0}, got); diff != "" {
			t.Errorf("records of the observer's source per batch (-want +got):\n%s", diff)
		}
	})
}
