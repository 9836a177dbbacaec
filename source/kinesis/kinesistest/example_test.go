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

	sc, err := stream.NewPipeline(stream.Config{BatchInterval: 10 * time.Millisecond})
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
	words := stream.FlatMap(stream.From(sc, src), func(r kinesis.Record) []string { return strings.Fields(string(r.Data)) })
	var mu sync.Mutex
	counts := map[string]int64{}
	seen, all := 0, make(chan struct{})
	stream.ForEachBatch(stream.CountByValue(words), func(_ context.Context, b *batch.Batch[stream.Pair[string, int64]]) error {
		mu.Lock()
		defer mu.Unlock()
		for p := range b.All() {
			counts[p.Key] += p.Value
			seen += int(p.Value)
		}
		if seen == 10 {
			close(all)
		}
		return nil
	})

	done := make(chan error, 1)
	go func() { done <- sc.Run(context.Background()) }()
	select {
	case <-all:
		sc.Drain(context.Background()) // finish what was pushed, then stop
		err = <-done
	case err = <-done: // stopped before every word was counted
	}
	if err != nil {
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
