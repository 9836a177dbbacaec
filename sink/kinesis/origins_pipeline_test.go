package kinesis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/sink/kinesis"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// TestPipelineOriginsAcrossWorkers copies a stream to another twice, as
// two workers of a fleet do when a shard's lease moves back to its
// checkpoint: two pipelines with different batch intervals, so the same
// input records are written in batches of other times and bounds. With
// stream.Origins the tags name the input records, and a pipeline reading
// the target through Deduplicate gets every input record exactly once,
// each key's in input order; version 1 tags (writer, batch time, index) cannot tell the second
// worker's records for copies, and keep them.
func TestPipelineOriginsAcrossWorkers(t *testing.T) {
	env := servers.Env(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	in := newStream(t, env, 2)
	want := records(1500, 60, 0)
	data := make([][]byte, len(want))
	for i, r := range want {
		_, data[i] = recordOf(r)
	}
	if err := env.PutRecords(ctx, in, data, func(i int) string { return want[i].Key }); err != nil {
		t.Fatal(err)
	}
	copyTwice := func(t *testing.T, opts ...stream.Option) (raw int, kept []rec) {
		out := newStream(t, env, 3)
		for w, interval := range []time.Duration{200 * time.Millisecond, 70 * time.Millisecond} {
			awsCfg := env.AWSConfig()
			recv, err := source.New(source.Config{Stream: in, App: "worker" + string(rune('a'+w)), InitialPosition: source.TrimHorizon,
				AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			p, err := stream.NewPipeline(stream.Config{BatchInterval: interval})
			if err != nil {
				t.Fatal(err)
			}
			sink, err := kinesis.New(kinesis.Config[rec]{Client: env.Kinesis(), Stream: out, Record: recordOf, Origin: "copy/out"})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			written := 0
			done := make(chan struct{})
			recs := stream.Map(stream.From(p, recv), func(r source.Record) rec { return parse(t, r.Data) })
			stream.ForEachBatch(recs, func(ctx context.Context, b *batch.Batch[rec]) error {
				if err := sink.Write(ctx, b); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if written += b.Len(); written == len(want) && b.Len() > 0 {
					close(done)
				}
				return nil
			}, opts...)
			errc := make(chan error, 1)
			go func() { errc <- p.Run(ctx) }()
			select {
			case <-done:
			case err := <-errc:
				t.Fatalf("worker %d: Run returned early: %v", w, err)
			}
			p.Drain(context.Background())
			if err := <-errc; err != nil {
				t.Fatalf("worker %d: Run: %v", w, err)
			}
		}
		for _, recs := range readAll(t, env.Kinesis(), out) {
			for _, d := range recs {
				raw++
				if _, _, ok, err := origin.Decode(d); !ok || err != nil {
					t.Fatalf("record %q not tagged: %v", d, err)
				}
			}
		}
		return raw, readDeduplicated(t, env, out, raw)
	}

	raw, kept := copyTwice(t, stream.Origins())
	// At least: a PutRecords attempt that timed out after Kinesis applied
	// it (a loaded machine) is sent again, and its records are in the
	// stream twice; Deduplicate keeps one.
	if raw < 2*len(want) {
		t.Errorf("%d records in the target stream, want at least %d: each worker writes every one", raw, 2*len(want))
	}
	checkOnceInOrder(t, want, kept)

	raw, kept = copyTwice(t)
	if len(kept) <= len(want) {
		t.Errorf("version 1 tags: %d of %d records kept, want copies kept: the test does not tell origins from batches", len(kept), raw)
	}
}
