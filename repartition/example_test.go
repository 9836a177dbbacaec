package repartition_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/localaws"
	"github.com/weirstream/weir/repartition"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// Words read from a 2-shard stream, whatever their shard, are counted
// after ByKey, which puts every record of a word on one shard of the
// intermediate stream "words-by-word" (created with 2 shards). With
// Leases set on both the receiver and ByKey, the same program runs on a
// fleet.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env, err := localaws.Start(ctx, localaws.Options{Kinesis: true}) // a local kinesalite
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	words := strings.Fields("a b a c b a d a")
	if err := env.CreateStream(ctx, "words", 2); err != nil {
		fmt.Println(err)
		return
	}
	data := make([][]byte, len(words))
	for i, w := range words {
		data[i] = []byte(w)
	}
	if err := env.PutRecords(ctx, "words", data, nil); err != nil { // partition key: the index
		fmt.Println(err)
		return
	}

	awsCfg := env.AWSConfig()
	recv, err := kinesis.New(kinesis.Config{Stream: "words", App: "wordcount", InitialPosition: kinesis.TrimHorizon,
		AWS: &awsCfg, Endpoint: env.KinesisEndpoint})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := stream.NewPipeline(stream.Config{BatchInterval: 200 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	pairs := stream.Map(stream.From(p, recv), func(r kinesis.Record) stream.Pair[string, int] {
		return stream.Pair[string, int]{Key: string(r.Data), Value: 1}
	})
	byWord, err := repartition.ByKey(ctx, pairs, repartition.Config[string, int]{
		Stream: "words-by-word", Shards: 2, AWS: &awsCfg, Endpoint: env.KinesisEndpoint,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	counts := stream.UpdateStateByKey(byWord, func(_ string, ones []int, n int, _ bool) (int, bool) {
		return n + len(ones), true
	})
	var once sync.Once
	stream.ForEachBatch(counts, func(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
		out, total := []string{}, 0
		for c := range b.All() {
			out, total = append(out, fmt.Sprintf("%s=%d", c.Key, c.Value)), total+c.Value
		}
		if total == len(words) {
			once.Do(func() {
				slices.Sort(out)
				fmt.Println(strings.Join(out, " "))
				go p.Drain(context.Background())
			})
		}
		return nil
	})
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// a=4 b=2 c=1 d=1
}
