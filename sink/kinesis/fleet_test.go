package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/kinesis"
	weirsource "github.com/weirstream/weir/source"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// onFleet calls write once with the context of a running pipeline with a
// recovery log whose source shares its shards with other workers (a
// fleet), as an output's function gets it.
func onFleet(t *testing.T, write func(ctx context.Context) error) {
	t.Helper()
	onPipeline(t, true, write)
}

// onPipeline calls write once with the context of a running pipeline, as
// an output's function gets it: with a recovery log, and a source sharing
// its shards with other workers, if fleet is set; else on one worker
// without a recovery log.
func onPipeline(t *testing.T, fleet bool, write func(ctx context.Context) error) {
	t.Helper()
	cfg := stream.Config{BatchInterval: 20 * time.Millisecond}
	if fleet {
		cfg.Recovery = recovery.Dir(t.TempDir())
	}
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := memory.New[source.Record](memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Push(source.Record{}); err != nil {
		t.Fatal(err)
	}
	var from weirsource.Receiver[source.Record] = src
	if fleet {
		from = sharing{src}
	}
	var once sync.Once
	stream.ForEachBatch(stream.From(p, from), func(ctx context.Context, _ *batch.Batch[source.Record]) error {
		var err error
		once.Do(func() { err = write(ctx) })
		return err
	}, stream.Retry(0))
	if err := p.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFleetWritersSameOrigin writes, on kinesalite, the records of two
// workers of a fleet configured alike (the same Origin), each in its batch
// at the same time (the workers' batch timers are aligned to the
// interval), and reads the stream through Deduplicate: every record of
// both must come out. With the writer named by Origin alone, the second
// worker's records had the first's tags and were dropped as copies. A
// batch written twice by one worker (a retry) is still read once, and so
// is one replayed after a restart by a worker given a Worker name.
func TestFleetWritersSameOrigin(t *testing.T) {
	env := servers.Env(t)
	const bt = 1_700_000_000_000
	for _, tc := range []struct {
		name    string
		workers [2]string
	}{{"default", [2]string{"", ""}}, {"named", [2]string{"host-a", "host-b"}}} {
		t.Run(tc.name, func(t *testing.T) {
			out := newStream(t, env, 2)
			var want []rec
			raw := 0
			for w, worker := range tc.workers {
				recs := make([]rec, 12)
				for i := range recs {
					recs[i] = rec{Key: fmt.Sprintf("%c%d", 'a'+w, i%4), I: i}
				}
				want = append(want, recs...)
				b := batch.New(bt, nil, recs)
				newWorker := func() *kinesis.Sink[rec] {
					s, err := kinesis.New(kinesis.Config[rec]{Client: env.Kinesis(), Stream: out, Record: recordOf, Origin: "fleet/out", Worker: worker})
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
				s := newWorker()
				onFleet(t, func(ctx context.Context) error {
					if err := s.Write(ctx, b); err != nil {
						return err
					}
					return s.Write(ctx, b) // a retry
				})
				raw += 2 * len(recs)
				if worker != "" {
					restarted := newWorker()
					onFleet(t, func(ctx context.Context) error { return restarted.Write(ctx, b) })
					raw += len(recs)
				}
			}
			checkOnceInOrder(t, want, readDeduplicated(t, env, out, raw))
		})
	}
}

// With Worker set, version 1 tags name Origin/Worker, on one worker too;
// Worker needs Origin, and the two must fit a tag's writer.
func TestWorkerNamesTheWriter(t *testing.T) {
	f := newFake(t, nil)
	s, err := kinesis.New(kinesis.Config[rec]{Client: f, Stream: "out", Origin: "w", Worker: "host-a", Record: recordOf})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), batch.New(1000, nil, []rec{{"a", 0}})); err != nil {
		t.Fatal(err)
	}
	if len(f.tags) != 1 || f.tags[0].Writer != "w/host-a" {
		t.Errorf("tags %+v: want the writer w/host-a", f.tags)
	}
	for _, tc := range []struct {
		cfg  kinesis.Config[rec]
		want string
	}{
		{kinesis.Config[rec]{Worker: "a"}, "Worker set without Origin"},
		{kinesis.Config[rec]{Origin: strings.Repeat("o", 100), Worker: strings.Repeat("w", 28)}, "Origin and Worker of 129 bytes"},
	} {
		tc.cfg.Client, tc.cfg.Stream, tc.cfg.Record = f, "out", recordOf
		if _, err := kinesis.New(tc.cfg); !errors.Is(err, kinesis.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v, want ErrInvalidConfig saying %q", err, tc.want)
		}
	}
}

// TestRunsWithoutLogSameOrigin writes, on kinesalite, the records of two
// Runs of a pipeline on one worker without a recovery log (two Sinks: the
// process restarted, its wall clock behind the first Run's batches), each
// in its batch at the same time, each batch twice (an output retried),
// and reads the stream through Deduplicate: every record of both Runs must
// come out once. With the writer named by Origin alone, the second Run's
// records had the first's tags and were dropped as copies of them.
func TestRunsWithoutLogSameOrigin(t *testing.T) {
	env := servers.Env(t)
	const bt = 1_700_000_000_000
	out := newStream(t, env, 2)
	var want []rec
	for run := range 2 {
		recs := make([]rec, 12)
		for i := range recs {
			recs[i] = rec{Key: fmt.Sprintf("%c%d", 'a'+run, i%4), I: i}
		}
		want = append(want, recs...)
		b := batch.New(bt, nil, recs)
		s, err := kinesis.New(kinesis.Config[rec]{Client: env.Kinesis(), Stream: out, Record: recordOf, Origin: "app/out", Worker: "host-a"})
		if err != nil {
			t.Fatal(err)
		}
		onPipeline(t, false, func(ctx context.Context) error {
			if err := s.Write(ctx, b); err != nil {
				return err
			}
			return s.Write(ctx, b) // a retry
		})
	}
	checkOnceInOrder(t, want, readDeduplicated(t, env, out, 2*len(want)))
}

// Without a recovery log, version 1 tags name Origin and the Run: an
// Origin that leaves no room for the Run's name in a tag's writer fails
// Write with ErrInvalidConfig naming the fix, before anything is sent.
func TestRunNamesTheWriterWithoutLog(t *testing.T) {
	f := newFake(t, nil)
	for _, n := range []int{111, 112} {
		s := newSink(t, f, strings.Repeat("o", n), false)
		var err error
		onPipeline(t, false, func(ctx context.Context) error {
			err = s.Write(ctx, batch.New(1000, nil, []rec{{"a", 0}}))
			return nil
		})
		switch {
		case n == 111 && err != nil:
			t.Errorf("Origin of %d bytes: Write = %v, want nil", n, err)
		case n == 112 && (!errors.Is(err, kinesis.ErrInvalidConfig) || !strings.Contains(err.Error(), "stream.Config.Recovery")):
			t.Errorf("Origin of %d bytes: Write = %v, want ErrInvalidConfig naming stream.Config.Recovery", n, err)
		}
	}
	if len(f.tags) != 1 || !strings.HasPrefix(f.tags[0].Writer, strings.Repeat("o", 111)+"/") || len(f.tags[0].Writer) != 128 {
		t.Errorf("tags %+v: want one, its writer the Origin, \"/\" and the Run's name", f.tags)
	}
}
