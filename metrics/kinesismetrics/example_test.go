package kinesismetrics_test

import (
	"context"
	"log"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/metrics/kinesismetrics"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// A Collector of a Kinesis pipeline's numbers: the receiver's counters and
// shard states, and every worker's leases in the lease table the receiver
// shares with them.
func Example() {
	ctx := context.Background()
	leases := leasetable.Config{TableName: "wordcount"}
	src, err := kinesis.New(kinesis.Config{Stream: "words", App: "wordcount", Leases: &leases})
	if err != nil {
		log.Fatal(err)
	}
	table, err := kinesismetrics.Leases(ctx, leases)
	if err != nil {
		log.Fatal(err)
	}
	c, err := metrics.New(metrics.Config{
		BatchInterval: time.Second,
		Receivers:     []metrics.Receiver{kinesismetrics.Receiver(src)},
		Leases:        table,
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Listeners: []stream.Listener{c}})
	if err != nil {
		log.Fatal(err)
	}
	records := stream.From(p, src)
	stream.Print(records, 10)

	go c.Run(ctx) // samples the receiver and the table until ctx is done
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
