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
	"github.com/weirstream/weir/sink/kinesis"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// onFleet calls write once with the context of a running pipeline whose
// source shares its shards with other workers (a fleet), as an output's
// function gets it.
func onFleet(t *testing.T, write func(ctx context.Context) error) {
	t.Helper()
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 20 * time.Millisecond})
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
	var once sync.Once
	stream.ForEachBatch(stream.From(p, sharing{src}), func(ctx context.Context, _ *batch.Batch[source.Record]) error {
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
