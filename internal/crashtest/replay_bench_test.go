//go:build unix

package crashtest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// replayRecords returns the number of records of BenchmarkStateReplay:
// 50,000, or 10,000 under -short (see shortOr).
func replayRecords() int { return shortOr(50000, 10000) }

// timedReceiver is a Kinesis receiver that times its Recompute calls: the
// replay of a restart.
type timedReceiver struct {
	*kinesis.Receiver
	mu          sync.Mutex
	first, last time.Time
	recomputed  int
	done        chan struct{} // closed once every record was recomputed
}

func (r *timedReceiver) Recompute(ctx context.Context, info batch.BlockInfo) ([]kinesis.Record, error) {
	start := time.Now()
	recs, err := r.Receiver.Recompute(ctx, info)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first.IsZero() {
		r.first = start
	}
	r.last = time.Now()
	if r.recomputed += len(recs); r.recomputed == replayRecords() {
		close(r.done)
	}
	return recs, err
}

// BenchmarkStateReplay measures the replay of a restart with state against
// the plain read of the same records, on kinesalite: a pipeline with a
// running count per key (UpdateStateByKey) reads replayRecords() records put
// beforehand on 4 shards, with no snapshot but the first (so that every
// batch is replayed), and is stopped; a second run on the same log
// rebuilds the state by recomputing every batch from its ranges. Reported:
// read-rec/s (from the first Run's start to its last record output),
// replay-rec/s (from the second Run's start, log and snapshot load
// included, to its last Recompute) and their ratio. Run with
// -benchtime=1x -count=5 and take medians: the machine is shared.
func BenchmarkStateReplay(b *testing.B) {
	env := servers.Env(b)
	for range b.N {
		read, replay := replayOnce(b, env)
		b.ReportMetric(read, "read-rec/s")
		b.ReportMetric(replay, "replay-rec/s")
		b.ReportMetric(replay/read, "replay/read")
	}
}

func replayOnce(b *testing.B, env *localaws.Env) (read, replay float64) {
	ctx := b.Context()
	name := localaws.UniqueName(b) + strconv.Itoa(int(time.Now().UnixNano()%1e6))
	if err := env.CreateStream(ctx, name, 4); err != nil {
		b.Fatal(err)
	}
	putNumbered(b, env, name, replayRecords())
	dir := b.TempDir()
	build := func() (*stream.Pipeline, *timedReceiver, *outputClock) {
		awsCfg := env.AWSConfig()
		recv, err := kinesis.New(kinesis.Config{Stream: name, App: "replay", InitialPosition: kinesis.TrimHorizon,
			AWS: &awsCfg, Endpoint: env.KinesisEndpoint, PollInterval: pollInterval})
		if err != nil {
			b.Fatal(err)
		}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: batchInterval, BlockInterval: blockInterval,
			Recovery: recovery.Dir(dir), StateSnapshotInterval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		tr := &timedReceiver{Receiver: recv, done: make(chan struct{})}
		recs := stream.From(p, tr)
		oc := &outputClock{done: make(chan struct{})}
		stream.ForEachBatch(recs, oc.see)
		pairs := stream.Map(recs, func(r kinesis.Record) stream.Pair[string, int] {
			id, _ := strconv.Atoi(string(r.Data))
			return stream.Pair[string, int]{Key: strconv.Itoa(id % 100), Value: 1}
		})
		counts := stream.UpdateStateByKey(pairs, func(_ string, vs []int, st int, _ bool) (int, bool) { return st + len(vs), true })
		stream.ForEachBatch(counts, func(context.Context, *batch.Batch[stream.Pair[string, int]]) error { return nil })
		return p, tr, oc
	}
	p1, _, oc := build()
	start1 := runUntil(b, p1, oc.done)
	p2, tr, _ := build()
	start2 := runUntil(b, p2, tr.done)
	read = float64(replayRecords()) / oc.last.Sub(start1).Seconds()
	replay = float64(replayRecords()) / tr.last.Sub(start2).Seconds()
	return read, replay
}

// putNumbered puts records "0" to "n-1" (n a multiple of 500) on the
// stream name, each its own partition key, 500 a call.
func putNumbered(b *testing.B, env *localaws.Env, name string, n int) {
	client := env.Kinesis()
	for i := 0; i < n; i += 500 {
		entries := make([]types.PutRecordsRequestEntry, 500)
		for j := range entries {
			id := strconv.Itoa(i + j)
			entries[j] = types.PutRecordsRequestEntry{Data: []byte(id), PartitionKey: aws.String(id)}
		}
		if _, err := client.PutRecords(b.Context(), &awskinesis.PutRecordsInput{StreamName: aws.String(name), Records: entries}); err != nil {
			b.Fatal(err)
		}
	}
}

// runUntil runs p until until is closed, then stops it, and returns when
// it started; it fails b if Run ends first or fails, or until is not closed
// within waitLimit.
func runUntil(b *testing.B, p *stream.Pipeline, until <-chan struct{}) time.Time {
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(b.Context()) }()
	select {
	case <-until:
	case err := <-errc:
		b.Fatalf("Run ended early: %v", err)
	case <-time.After(waitLimit):
		b.Fatalf("not done within %v", waitLimit)
	}
	p.Stop()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return start
}

// outputClock times the first and last record an output sees.
type outputClock struct {
	mu          sync.Mutex
	first, last time.Time
	n           int
	done        chan struct{}
}

func (o *outputClock) see(_ context.Context, b *batch.Batch[kinesis.Record]) error {
	if b.Len() == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.first.IsZero() {
		o.first = time.Now()
	}
	o.last = time.Now()
	if o.n += b.Len(); o.n == replayRecords() {
		close(o.done)
	}
	return nil
}
