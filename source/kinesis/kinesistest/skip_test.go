package kinesistest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery/recoverytest"
	"github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
	"github.com/weirstream/weir/stream"
)

// skipReports collects the receiver errors a pipeline's listeners hear.
type skipReports struct {
	stream.NopListener
	mu   sync.Mutex
	errs []error
}

func (l *skipReports) ReceiverError(info stream.ReceiverInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, info.Err)
}

// TestSkipUnavailableRangesInPipeline: a batch is logged and the process
// crashes before it completes; retention then trims one of its two shards
// past the batch's records. Restarted with SkipUnavailableRanges, the
// pipeline runs the batch without the trimmed range (the other shard's
// records recomputed, its block shown without the range) and goes on, the
// skip reported to the listeners; without it, the restart fails naming the
// range.
func TestSkipUnavailableRangesInPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := kinesistest.New()
		if err := fake.CreateStream("s", 2); err != nil {
			t.Fatal(err)
		}
		// Old records on both shards: keys whose hashes fall on each.
		shardOf := map[string]string{}
		seqOf := map[string]string{}
		var old []string
		for i := 0; len(shardOf) < 2 || len(old) < 10; i++ {
			data := fmt.Sprintf("old-%d", i)
			shard, seq, err := fake.Put("s", fmt.Sprintf("k%d", i), []byte(data))
			if err != nil {
				t.Fatal(err)
			}
			shardOf[data], seqOf[seq] = shard, data
			old = append(old, data)
			if i > 100 {
				t.Fatal("every key on one shard")
			}
		}
		trimmed := shardOf[old[0]]
		log := recoverytest.Memory()
		newRecv := func(skip bool) *kinesis.Receiver {
			r, err := kinesis.New(kinesis.Config{
				Stream: "s", App: "a", Client: fake, InitialPosition: kinesis.TrimHorizon,
				PollInterval: 100 * time.Millisecond, SkipUnavailableRanges: skip,
			})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}

		// Run 1: the batch with the old records never completes; then a crash.
		sc1, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: log})
		if err != nil {
			t.Fatal(err)
		}
		seen := make(chan struct{})
		var once sync.Once
		stream.ForEachBatch(stream.From(sc1, newRecv(false)), func(ctx context.Context, b *batch.Batch[kinesis.Record]) error {
			if b.Len() > 0 {
				once.Do(func() { close(seen) })
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		ctx1, crash := context.WithCancel(t.Context())
		ran1 := make(chan error, 1)
		go func() { ran1 <- sc1.Run(ctx1) }()
		<-seen
		time.Sleep(5 * time.Second) // every old record read and logged
		crash()
		<-ran1

		// Retention passes on one shard: its old records are trimmed.
		_, newSeq, err := fake.Put("s", "k0", []byte("new"))
		if err != nil {
			t.Fatal(err)
		}
		if err := fake.Trim("s", trimmed, newSeq); err != nil {
			t.Fatal(err)
		}

		// Without SkipUnavailableRanges: the restart fails, naming the range.
		sc, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: log})
		if err != nil {
			t.Fatal(err)
		}
		stream.ForEachBatch(stream.From(sc, newRecv(false)), func(context.Context, *batch.Batch[kinesis.Record]) error { return nil })
		var unavailable *kinesis.RangeUnavailableError
		if err := sc.Run(t.Context()); !errors.As(err, &unavailable) || unavailable.Range.Shard != trimmed {
			t.Fatalf("Run without SkipUnavailableRanges: %v, want a *kinesis.RangeUnavailableError of shard %s", err, trimmed)
		}

		// With it: the batch runs without the trimmed range, and the
		// pipeline goes on.
		reports := &skipReports{}
		sc2, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second, Recovery: log, Listeners: []stream.Listener{reports}})
		if err != nil {
			t.Fatal(err)
		}
		r2 := newRecv(true)
		var mu sync.Mutex
		var got []string
		gotNew := make(chan struct{})
		var once2 sync.Once
		stream.ForEachBatch(stream.From(sc2, r2), func(ctx context.Context, b *batch.Batch[kinesis.Record]) error {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, info := range b.Blocks() {
				for _, rg := range info.Ranges {
					if data, ok := seqOf[rg.First]; ok && shardOf[data] == trimmed {
						t.Errorf("block %v shows the trimmed range %v", info.ID, rg)
					}
				}
				n += info.Count
			}
			if n != b.Len() {
				t.Errorf("blocks count %d records, the batch has %d", n, b.Len())
			}
			for rec := range b.All() {
				got = append(got, string(rec.Data))
				if string(rec.Data) == "new" {
					once2.Do(func() { close(gotNew) })
				}
			}
			return nil
		})
		ran2 := make(chan error, 1)
		go func() { ran2 <- sc2.Run(t.Context()) }()
		select {
		case <-gotNew:
		case err := <-ran2:
			t.Fatalf("Run with SkipUnavailableRanges: %v", err)
		case <-time.After(10 * time.Minute):
			t.Fatalf("nothing new after 10 virtual minutes; got %v", got)
		}
		if err := sc2.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-ran2; err != nil {
			t.Fatalf("Run with SkipUnavailableRanges: %v", err)
		}
		var want []string
		for _, data := range old {
			if shardOf[data] != trimmed {
				want = append(want, data)
			}
		}
		want = append(want, "new")
		mu.Lock()
		sortedGot := slices.Sorted(slices.Values(got))
		mu.Unlock()
		if diff := cmp.Diff(slices.Sorted(slices.Values(want)), sortedGot); diff != "" {
			t.Errorf("records after the restart (-want +got):\n%s", diff)
		}
		if s := r2.Stats().RangesSkipped; s < 1 {
			t.Errorf("%d ranges skipped, want >= 1", s)
		}
		reports.mu.Lock()
		defer reports.mu.Unlock()
		heard := 0
		for _, err := range reports.errs {
			if errors.As(err, &unavailable) && unavailable.Range.Shard == trimmed {
				heard++
			}
		}
		if heard == 0 {
			t.Errorf("the listeners heard of no skipped range: %v", reports.errs)
		}
	})
}
