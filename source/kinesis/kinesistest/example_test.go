package kinesistest_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
	"github.com/weirstream/weir/stream"
)

// A typical test of a pipeline: a fake stream, records put on it, and the
// pipeline reading it through kinesis.Config.Client. In a test, run it
// inside synctest.Test so polling takes no real time.
func Example() {
	fake := kinesistest.New()
	if err := fake.CreateStream("words", 2); err != nil {
		fmt.Println(err)
		return
	}
	lines := []string{"to be or not to be", "that is the question"}
	for i, l := range lines {
		if _, _, err := fake.Put("words", fmt.Sprint(i), []byte(l)); err != nil {
			fmt.Println(err)
			return
		}
	}

	p, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := kinesis.New(kinesis.Config{
		Stream: "words", App: "wordcount", Client: fake,
		InitialPosition: kinesis.TrimHorizon, PollInterval: 10 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	words := stream.FlatMap(stream.From(p, src), func(r kinesis.Record) []string { return strings.Fields(string(r.Data)) })
	var mu sync.Mutex
	counts := map[string]int64{}
	seen := 0
	stream.ForEachBatch(stream.CountByValue(words), func(ctx context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		mu.Lock()
		defer mu.Unlock()
		for kv := range b.All() {
			counts[kv.Key] += kv.Value
			seen += int(kv.Value)
		}
		if seen == 10 {
			// Every word is counted: finish what was pushed, then stop.
			// Called from an output with its ctx, Drain does not wait.
			return p.Drain(ctx)
		}
		return nil
	})

	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	for _, w := range slices.Sorted(maps.Keys(counts)) {
		fmt.Println(w, counts[w])
	}
	// Output:
	// be 2
	// is 1
	// not 1
	// or 1
	// question 1
	// that 1
	// the 1
	// to 2
}
