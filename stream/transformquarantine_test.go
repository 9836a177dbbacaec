package stream_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// upperUnlessBoom is a Transform's function that upper-cases a batch's
// words and panics on a batch holding "boom".
func upperUnlessBoom(_ context.Context, b *batch.Batch[string]) (*batch.Batch[string], error) {
	var out []string
	for w := range b.All() {
		if w == "boom" {
			panic("transform: boom")
		}
		out = append(out, strings.ToUpper(w))
	}
	return batch.Derive(b, out), nil
}

// runTransform runs, in a bubble, a pipeline of two shards whose words
// (batches, one per batch interval) go through build, and returns what
// its output printed, batch by batch (records sorted: the shards' order
// within a batch is not the point), the BatchInfo.Outputs of the batches
// added up, and Run's error.
func runTransform(t *testing.T, batches [][]string, build func(words *stream.Stream[string]) *stream.Stream[string]) ([]string, []stream.OutputInfo, error) {
	t.Helper()
	var out []string
	var counted []stream.OutputInfo
	var err error
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		infos := make(chan stream.BatchInfo, 100)
		p, perr := stream.NewPipeline(stream.Config{BatchInterval: iv, Parallelism: 2, Listeners: []stream.Listener{completed{c: infos}}})
		if perr != nil {
			t.Fatal(perr)
		}
		src, perr := memory.New[string](memory.Config{Shards: 2})
		if perr != nil {
			t.Fatal(perr)
		}
		stream.ForEachBatch(build(stream.From(p, src)), func(_ context.Context, b *batch.Batch[string]) error {
			recs := b.Records()
			slices.Sort(recs)
			out = append(out, fmt.Sprint(recs))
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(iv / 2)
		for _, recs := range batches {
			if err := src.Push(recs...); err != nil {
				t.Fatal(err)
			}
			time.Sleep(iv)
		}
		p.Drain(context.Background())
		err = <-errc
		for len(infos) > 0 {
			info := <-infos
			for len(counted) < len(info.Outputs) {
				counted = append(counted, stream.OutputInfo{})
			}
			for i, o := range info.Outputs {
				counted[i].Output = o.Output
				counted[i].Quarantined += o.Quarantined
			}
		}
	})
	return out, counted, err
}

// TestQuarantineTransform gives Transform Quarantine. Before, a Transform
// whose f panicked on a batch stopped the Run, and every restart
// recomputed the batch and stopped again: one bad record stopped the
// stream for good. Now, with Quarantine, each record of that batch is
// quarantined with the panic, the Transform's batch is empty, and the
// Run goes on; without it, Run's error names the fix. A narrow operator
// before the Transform that panics on one record has that record alone
// quarantined, the others transformed.
func TestQuarantineTransform(t *testing.T) {
	batches := [][]string{{"a", "b"}, {"c", "boom"}, {"d"}}
	t.Run("f panics", func(t *testing.T) {
		dead := &deadList{}
		out, counted, err := runTransform(t, batches, func(words *stream.Stream[string]) *stream.Stream[string] {
			return stream.Transform(words, upperUnlessBoom, stream.Quarantine(dead))
		})
		if err != nil {
			t.Fatalf("Run = %v, want nil: the batch holding boom quarantined", err)
		}
		if diff := cmp.Diff([]string{"[A B]", "[]", "[D]"}, out); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
		var recs []string
		for _, l := range dead.letters {
			recs = append(recs, string(l.Record))
			if l.Panic != "transform: boom" || l.Stack == "" || !strings.HasPrefix(l.OutputName, "Transform") || l.Output != 1 {
				t.Errorf("letter %+v: want the panic and its stack, the Transform named, output 1 (after the pipeline's one output)", l)
			}
		}
		slices.Sort(recs)
		if diff := cmp.Diff([]string{"boom", "c"}, recs); diff != "" {
			t.Errorf("records quarantined (-want +got): the whole batch f panicked on\n%s", diff)
		}
		if len(counted) != 2 || counted[0].Quarantined != 0 || counted[1].Quarantined != 2 ||
			len(dead.letters) == 0 || counted[1].Output != dead.letters[0].OutputName {
			t.Errorf("BatchInfo.Outputs added up: %+v; want the output with none quarantined, then the Transform, named as its letters, with 2", counted)
		}
	})
	t.Run("without Quarantine", func(t *testing.T) {
		_, _, err := runTransform(t, batches, func(words *stream.Stream[string]) *stream.Stream[string] {
			return stream.Transform(words, upperUnlessBoom)
		})
		if err == nil || !strings.Contains(err.Error(), "panic: transform: boom") || !strings.Contains(err.Error(), "give Transform stream.Quarantine(d)") {
			t.Errorf("Run = %v, want the panic and the fix: give Transform stream.Quarantine(d)", err)
		}
	})
	t.Run("narrow operator before", func(t *testing.T) {
		dead := &deadList{}
		var seen []string // what f was given
		out, _, err := runTransform(t, [][]string{{"a", "b"}, {"c", "bad", "e"}, {"d"}}, func(words *stream.Stream[string]) *stream.Stream[string] {
			checked := stream.Map(words, func(w string) string {
				if w == "bad" {
					panic("map: bad")
				}
				return w
			})
			return stream.Transform(checked, func(ctx context.Context, b *batch.Batch[string]) (*batch.Batch[string], error) {
				seen = append(seen, b.Records()...)
				return upperUnlessBoom(ctx, b)
			}, stream.Quarantine(dead))
		})
		if err != nil {
			t.Fatalf("Run = %v, want nil: the record bad quarantined", err)
		}
		if diff := cmp.Diff([]string{"[A B]", "[C E]", "[D]"}, out); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
		if len(dead.letters) != 1 || string(dead.letters[0].Record) != "bad" || dead.letters[0].Range.Shard == "" || dead.letters[0].Panic != "map: bad" {
			t.Errorf("letters %+v, want one, of bad, with its shard and the Map's panic", dead.letters)
		}
		if slices.Contains(seen, "bad") {
			t.Errorf("f was given %v, with the record the Map failed on", seen)
		}
	})
	t.Run("Retry refused", func(t *testing.T) {
		_, _, err := runTransform(t, batches, func(words *stream.Stream[string]) *stream.Stream[string] {
			return stream.Transform(words, upperUnlessBoom, stream.Retry(2))
		})
		if err == nil || !strings.Contains(err.Error(), "Transform of From(source 0) (stream 0): Retry is an option of the outputs") {
			t.Errorf("Run = %v, want Retry refused on Transform", err)
		}
	})
}
