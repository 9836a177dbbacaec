package metrics_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/stream"
)

// handReceiver is a receiver whose records the test pushes, counting them
// as read, and whose Recompute gives any block back as Count empty strings.
type handReceiver struct {
	rt      chan source.Runtime[string]
	stop    chan struct{}
	stopped atomic.Bool
	read    atomic.Int64
}

func newHandReceiver() *handReceiver {
	return &handReceiver{rt: make(chan source.Runtime[string], 1), stop: make(chan struct{})}
}

func (r *handReceiver) Start(ctx context.Context, rt source.Runtime[string]) error {
	r.rt <- rt
	select {
	case <-r.stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *handReceiver) Stop(context.Context) error {
	if !r.stopped.Swap(true) {
		close(r.stop)
	}
	return nil
}

func (r *handReceiver) Recompute(_ context.Context, info batch.BlockInfo) ([]string, error) {
	return make([]string, info.Count), nil
}

// metricsOf is the handReceiver as a metrics.Receiver.
type metricsOf struct{ r *handReceiver }

func (m metricsOf) Name() string { return "hand" }
func (m metricsOf) Stats() metrics.ReceiverStats {
	return metrics.ReceiverStats{RecordsRead: m.r.read.Load()}
}

// TestUnbatchedRecordsAfterRestart restarts a pipeline whose recovery log
// holds a block stored and in no batch (a crash between its entry and its
// batch), which the restart puts in its first batch, recomputed from its
// ranges: its records were read by the process that crashed, not by this
// one, so they must not be taken out of this one's reads. After that
// batch, records read and not yet batched are counted as such.
func TestUnbatchedRecordsAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		store := recoverylog.NewMemory()
		l, err := recoverylog.Open(t.Context(), store, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		left := batch.BlockInfo{ID: batch.BlockID{Source: 0, Seq: 0}, Count: 5,
			Ranges: []batch.SeqRange{{Stream: "s", Shard: "0", First: "1", Last: "5", Count: 5}}}
		if err := l.Append(t.Context(), recoverylog.BlockStored(left)); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		r := newHandReceiver()
		c, err := metrics.New(metrics.Config{BatchInterval: iv, Receivers: []metrics.Receiver{metricsOf{r}},
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: store,
			Listeners: []stream.Listener{c}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		var batched atomic.Int64
		stream.ForEachBatch(stream.From[string](p, r), func(_ context.Context, b *batch.Batch[string]) error {
			batched.Add(int64(b.Len()))
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		rt := <-r.rt
		time.Sleep(iv + iv/2) // the first batch, with the block left
		synctest.Wait()
		if got := batched.Load(); got != 5 {
			t.Fatalf("the first batch after the restart has %d records, want the 5 of the block left", got)
		}
		recs := []string{"a", "b", "c"}
		if _, err := rt.Push(t.Context(), source.Block[string]{Records: recs}); err != nil {
			t.Fatal(err)
		}
		r.read.Add(int64(len(recs)))
		c.Sample(t.Context())
		if got := c.Snapshot().Batches.UnbatchedRecords; got != 3 {
			t.Errorf("UnbatchedRecords = %d, want the 3 read since the last batch", got)
		}
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}
