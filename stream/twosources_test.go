package stream_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// TestSourcesReadingOneShard runs a pipeline with a recovery log and two
// sources whose blocks name the same shards (two memory sources of the
// same stream name): the first run's blocks are the first source's, and
// after a restart the second source starts reading. The log keeps one
// resume position per stream and shard, so the second source would resume
// after the first one's records and skip its own: the Run must fail,
// naming the sources and the fix, rather than lose them. Named apart,
// every record of both is output.
func TestSourcesReadingOneShard(t *testing.T) {
	for _, apart := range []bool{false, true} {
		name := "same stream name"
		if apart {
			name = "named apart"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testSourcesReadingOneShard(t, apart) })
		})
	}
}

func testSourcesReadingOneShard(t *testing.T, apart bool) {
	log := recoverylog.NewMemory()
	da := &durable{log: log}
	db := &durable{log: log}
	var mu sync.Mutex
	got := map[string]int{}
	out := func(_ context.Context, b *batch.Batch[string]) error {
		mu.Lock()
		defer mu.Unlock()
		for r := range b.All() {
			got[r]++
		}
		return nil
	}
	build := func() (*stream.Pipeline, *replay, *replay) {
		p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: log})
		if err != nil {
			t.Fatal(err)
		}
		a := newReplay(t, da)
		b := newReplay(t, db)
		if apart {
			src, err := memory.New[string](memory.Config{Name: "other", Shards: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range db.calls {
				src.Push(c...)
			}
			b.Source = src
		}
		stream.ForEachBatch(stream.From(p, a, stream.Named("a")), out)
		stream.ForEachBatch(stream.From(p, b, stream.Named("b")), out)
		return p, a, b
	}
	produce := func(d *durable, src *replay, prefix string, n int) {
		for range n {
			r := prefix + d.record()
			d.calls = append(d.calls, []string{r})
			src.Source.Push(r)
			time.Sleep(100 * time.Millisecond)
		}
	}

	p, a, _ := build()
	errc := make(chan error, 1)
	go func() { errc <- p.Run(t.Context()) }()
	produce(da, a, "a", 20)
	time.Sleep(2 * time.Second)
	p.Stop()
	if err := <-errc; err != nil {
		t.Fatalf("first Run: %v", err)
	}

	p, _, b := build()
	go func() { errc <- p.Run(t.Context()) }()
	produce(db, b, "b", 5)
	time.Sleep(2 * time.Second)
	p.Drain(context.Background())
	err := <-errc
	var missing []string
	mu.Lock()
	defer mu.Unlock()
	for _, d := range []*durable{da, db} {
		for _, c := range d.calls {
			for _, r := range c {
				if got[r] == 0 {
					missing = append(missing, r)
				}
			}
		}
	}
	slices.Sort(missing)
	if !apart {
		if !errors.Is(err, stream.ErrInvalidConfig) || !strings.Contains(err.Error(), "sources 0 and 1") {
			t.Errorf("second Run = %v (records never output: %v), want an error wrapping ErrInvalidConfig naming sources 0 and 1", err, missing)
		}
		return
	}
	if err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if len(missing) > 0 {
		t.Errorf("records never output: %v", missing)
	}
}
