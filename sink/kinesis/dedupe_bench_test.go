package kinesis_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/sink/kinesis"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// BenchmarkDeduplicate runs a pipeline over 200,000 tagged records of 100
// bytes on 4 shards (one writer, one batch, every tenth record written
// twice), in one batch, through Deduplicate, and through a plain Map that
// only takes the tags off (origin.Decode, no state), and reports the cost
// per record of each:
//
//	go test -run '^$' -bench Deduplicate -count 5 ./sink/kinesis
//
// The difference is what Deduplicate's keyed state and filter cost.
func BenchmarkDeduplicate(b *testing.B) {
	const n, shards = 200_000, 4
	var recs [shards][]source.Record
	payload := make([]byte, 100)
	for i := range n {
		s := i % shards
		tag := origin.Tag{Writer: "bench/out", Batch: 1000, Index: uint64(i)}
		r := source.Record{Data: origin.Append(nil, tag, payload), ShardID: memory.ShardName(s)}
		recs[s] = append(recs[s], r)
		if i%10 == 0 {
			recs[s] = append(recs[s], r)
		}
	}
	strip := func(s *stream.Stream[source.Record]) *stream.Stream[source.Record] {
		return stream.Map(s, func(r source.Record) source.Record {
			if _, payload, ok, err := origin.Decode(r.Data); ok && err == nil {
				r.Data = payload
			}
			return r
		})
	}
	for _, tc := range []struct {
		name string
		op   func(*stream.Stream[source.Record]) *stream.Stream[source.Record]
		want int
	}{{"Map", strip, n + n/10}, {"Deduplicate", kinesis.Deduplicate, n}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				runOnce(b, recs[:], tc.op, tc.want)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n+n/10)), "ns/record")
		})
	}
}

// runOnce pushes recs (one slice a shard) into a pipeline through op and
// runs it until want records came out.
func runOnce(b *testing.B, recs [][]source.Record, op func(*stream.Stream[source.Record]) *stream.Stream[source.Record], want int) {
	src, err := memory.New[source.Record](memory.Config{Shards: len(recs), MaxQueued: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	for _, rs := range recs {
		if err := src.Push(rs...); err != nil {
			b.Fatal(err)
		}
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	got := 0
	stream.ForEachBatch(op(stream.From(p, src)), func(ctx context.Context, bt *batch.Batch[source.Record]) error {
		if got += bt.Len(); got >= want {
			return p.Drain(ctx)
		}
		return nil
	})
	if err := p.Run(b.Context()); err != nil {
		b.Fatal(err)
	}
	if got != want {
		b.Fatalf("%d records out, want %d", got, want)
	}
}
