package metrics_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/stream"
)

// BenchmarkBatchEvents measures what the Collector adds to each batch: the
// three events of a batch of 8 ranges, against stream.NopListener as the
// baseline, in the same run.
func BenchmarkBatchEvents(b *testing.B) {
	ranges := make([]batch.SeqRange, 8)
	for i := range ranges {
		ranges[i] = batch.SeqRange{Stream: "s", Shard: fmt.Sprintf("shardId-%012d", i), First: "49590338271490256608559692538361571095921575989136588802", Last: "49590338271490256608559692538361571095921575989136588899", Count: 100}
	}
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range []struct {
		name string
		l    stream.Listener
	}{{"baseline=NopListener", stream.NopListener{}}, {"Collector", c}} {
		b.Run(l.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				info := stream.BatchInfo{Time: batch.Time(int64(i) * 1000), Blocks: 8, Records: 800, Ranges: ranges}
				l.l.BatchScheduled(info)
				info.SchedulingDelay = time.Millisecond
				l.l.BatchStarted(info)
				info.ProcessingTime = 10 * time.Millisecond
				l.l.BatchCompleted(info)
			}
		})
	}
}
