package stream_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// BenchmarkRestartIdleReplay measures what an idle stateful pipeline's
// runs of empty batches cost its restart: an UpdateStateByKey holding
// keys, whose state every batch moves, restarted after 20 minutes of
// 200 ms batches idle since its last snapshot (the longest its idle
// snapshots leave, idleSnapshotEvery), so that it replays 6,000 empty
// batches for the state, against the same restart with no idle time
// (idle=0), in the same run. It times Run from its call to the first
// batch it completes (the first of the run a crash interrupted), and
// reports the ratio (idle/none). The log is the memory one.
//
//	go test -run '^$' -bench RestartIdleReplay -benchtime 5x ./stream
func BenchmarkRestartIdleReplay(b *testing.B) {
	for _, keys := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			var took [2]time.Duration
			for range b.N {
				for i, idle := range []time.Duration{0, 20 * time.Minute} {
					took[i] += restartAfterIdle(b, keys, idle)
				}
			}
			b.ReportMetric(float64(took[1])/float64(b.N)/1e6, "ms/restart-idle")
			b.ReportMetric(float64(took[0])/float64(b.N)/1e6, "ms/restart-none")
			b.ReportMetric(float64(took[1])/float64(took[0]), "idle/none")
		})
	}
}

// restartAfterIdle runs a pipeline until it completed a batch of keys
// records, drains it, logs idle of runs of empty batches after it as its
// batch runner does, and returns how long a restart takes to its first
// completed batch.
func restartAfterIdle(b *testing.B, keys int, idle time.Duration) time.Duration {
	b.Helper()
	const iv = 200 * time.Millisecond
	store := recoverylog.NewMemory()
	recs := make([]string, keys)
	for i := range recs {
		recs[i] = "k" + strconv.Itoa(i)
	}
	build := func() (*stream.Pipeline, chan stream.BatchInfo) {
		done := make(chan stream.BatchInfo, 1)
		src, err := memory.New[string](memory.Config{Shards: 1})
		if err != nil {
			b.Fatal(err)
		}
		if err := src.Push(recs...); err != nil {
			b.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: store,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Listeners: []stream.Listener{completed{c: done}}})
		if err != nil {
			b.Fatal(err)
		}
		pairs := stream.Map(stream.From(p, src), func(r string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: r, Value: 1} })
		st := stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + 1 + len(vs), true })
		stream.ForEachBatch(st, func(context.Context, *batch.Batch[stream.Pair[string, int]]) error { return nil })
		return p, done
	}
	run := func(p *stream.Pipeline, done chan stream.BatchInfo, records bool) {
		errc := make(chan error, 1)
		go func() { errc <- p.Run(b.Context()) }()
		for info := range done {
			if info.Err != nil {
				b.Fatal(info.Err)
			}
			if !records || info.Records > 0 {
				break
			}
		}
		if err := p.Drain(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	p1, done1 := build()
	run(p1, done1, true)
	st, err := recoverylog.Recover(store.Entries())
	if err != nil {
		b.Fatal(err)
	}
	last, _ := st.LastBatch()
	// The runs the batch runner writes while idle, the last one
	// interrupted by a crash: the restart replays the others and runs it.
	var runs []recoverylog.Entry
	for from := last.Add(iv); from <= last.Add(idle); {
		through := from.Add(10 * time.Second)
		runs = append(runs, recoverylog.EmptyRun(from, through, iv))
		from = through.Add(iv)
	}
	if idle == 0 {
		runs = append(runs, recoverylog.EmptyRun(last.Add(iv), last.Add(iv+10*time.Second), iv))
	}
	l, err := recoverylog.Open(b.Context(), store, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Append(b.Context(), runs...); err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	p2, done2 := build()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- p2.Run(b.Context()) }()
	info := <-done2
	took := time.Since(start)
	if info.Err != nil {
		b.Fatal(info.Err)
	}
	p2.Stop()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return took
}

// completed is a listener that sends each batch completed on c, when
// there is room.
type completed struct {
	stream.NopListener
	c chan stream.BatchInfo
}

func (l completed) BatchCompleted(info stream.BatchInfo) {
	select {
	case l.c <- info:
	default:
	}
}
