package metrics_test

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/stream"
)

// A Collector listens to a pipeline (stream.Config.Listeners) and keeps its
// numbers; here it is fed two batches by hand.
func ExampleCollector() {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	// p, err := stream.NewPipeline(stream.Config{Listeners: []stream.Listener{c}})
	// go c.Run(ctx) // samples Config.Receivers and Config.Leases
	for i, records := range []int{120, 80} {
		b := stream.BatchInfo{Time: batch.Time(1_000 * (i + 1)), Records: records}
		c.BatchScheduled(b)
		b.SchedulingDelay = 20 * time.Millisecond
		c.BatchStarted(b)
		b.ProcessingTime = 300 * time.Millisecond
		c.BatchCompleted(b)
	}
	s := c.Snapshot()
	fmt.Printf("%d batches, %d records, mean total delay %v\n",
		s.Batches.Completed, s.Batches.Records, s.Batches.TotalDelay.Mean())
	// Output:
	// 2 batches, 200 records, mean total delay 320ms
}
