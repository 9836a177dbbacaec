package kinesis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/sink/kinesis"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// TestPipelineReplayFiltersExactly runs a pipeline that copies a stream to
// another through the sink, with a recovery log, and crashes it in the
// middle of a batch's output (Stop from inside a PutRecords call, some of
// whose records failed): the batch was partly written, some later records
// before earlier ones. A restart on the same log recomputes the batch and
// writes it whole again, with the same tags. The target stream then holds
// copies, and a pipeline reading it through Deduplicate gets every input
// record exactly once, untagged, each key's in input order: what a run
// never interrupted writes.
func TestPipelineReplayFiltersExactly(t *testing.T) {
	env := servers.Env(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	in, out := newStream(t, env, 2), newStream(t, env, 3)
	want := records(2000, 100, 0)
	data := make([][]byte, len(want))
	for i, r := range want {
		_, data[i] = recordOf(r)
	}
	if err := env.PutRecords(ctx, in, data, func(i int) string { return want[i].Key }); err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()

	var mu sync.Mutex
	written := map[int]bool{} // input records in batches the sink finished
	done := make(chan struct{})
	var once sync.Once
	run := func(client kinesis.Client, hook func(p *stream.Pipeline)) error {
		awsCfg := env.AWSConfig()
		recv, err := source.New(source.Config{Stream: in, App: "copy", InitialPosition: source.TrimHorizon,
			AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: 200 * time.Millisecond, Recovery: recovery.Dir(logDir)})
		if err != nil {
			t.Fatal(err)
		}
		sink, err := kinesis.New(kinesis.Config[rec]{Client: client, Stream: out, Record: recordOf, Origin: "copy/out"})
		if err != nil {
			t.Fatal(err)
		}
		recs := stream.Map(stream.From(p, recv, stream.Named("in")), func(r source.Record) rec { return parse(t, r.Data) })
		stream.ForEachBatch(recs, func(ctx context.Context, b *batch.Batch[rec]) error {
			if err := sink.Write(ctx, b); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for r := range b.All() {
				written[r.I] = true
			}
			if len(written) == len(want) {
				once.Do(func() { close(done) })
			}
			return nil
		}, stream.Named("kinesis"))
		hook(p)
		return p.Run(ctx)
	}

	// Run 1: the third PutRecords call stops the pipeline; a third of the
	// records fail their first attempt.
	crashing, calls := faulty(env, func(r rec, attempt int) bool { return r.I%3 == 0 && attempt == 1 })
	if err := run(crashing, func(p *stream.Pipeline) {
		calls.after = func(call int) {
			if call == 3 {
				p.Stop()
			}
		}
	}); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	mu.Lock()
	completed := len(written)
	mu.Unlock()
	if completed == len(want) {
		t.Fatal("the first run wrote everything before its crash")
	}

	// Run 2: the same pipeline on the same log, until every record was in
	// a batch the sink finished.
	errc := make(chan error, 1)
	var p2 *stream.Pipeline
	go func() {
		errc <- run(env.Kinesis(), func(p *stream.Pipeline) { p2 = p })
	}()
	select {
	case <-done:
	case err := <-errc:
		t.Fatalf("second Run returned early: %v", err)
	case <-ctx.Done():
		t.Fatal("the second run did not write every record in time")
	}
	p2.Drain(context.Background())
	if err := <-errc; err != nil {
		t.Fatalf("second Run: %v", err)
	}

	raw := 0
	for _, recs := range readAll(t, env.Kinesis(), out) {
		raw += len(recs)
	}
	if raw <= len(want) {
		t.Errorf("%d records in the target stream: the crash left no copies to filter", raw)
	}
	kept := readDeduplicated(t, env, out, raw)
	checkOnceInOrder(t, want, kept)
	t.Logf("%d records in the target stream, %d after Deduplicate; run 1 completed %d", raw, len(kept), completed)
}

// readDeduplicated reads the stream name with a pipeline through
// kinesis.Deduplicate until it has read its raw records, and returns what
// Deduplicate let through, parsed, each shard's in order.
func readDeduplicated(t *testing.T, env *localaws.Env, name string, raw int) []rec {
	t.Helper()
	awsCfg := env.AWSConfig()
	recv, err := source.New(source.Config{Stream: name, App: "read", InitialPosition: source.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	in := stream.From(p, recv)
	byShard := map[string][]rec{}
	stream.ForEachBatch(kinesis.Deduplicate(in), func(_ context.Context, b *batch.Batch[source.Record]) error {
		for r := range b.All() {
			if origin.Tagged(r.Data) {
				t.Errorf("record %s of shard %s still tagged", r.SequenceNumber, r.ShardID)
			}
			byShard[r.ShardID] = append(byShard[r.ShardID], parse(t, r.Data))
		}
		return nil
	})
	read := 0 // declared after the dedupe's output: runs after it
	stream.ForEachBatch(in, func(ctx context.Context, b *batch.Batch[source.Record]) error {
		if read += b.Len(); read >= raw {
			return p.Drain(ctx)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	var kept []rec
	for _, rs := range byShard {
		kept = append(kept, rs...)
	}
	return kept
}
