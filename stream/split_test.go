package stream_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// sharingSource is a memory source that says, as a Kinesis receiver with
// leases does, whether other workers share its shards.
type sharingSource struct {
	*memory.Source[string]
	shares bool
}

func (s sharingSource) SharesShards() bool { return s.shares }

// splitGraph builds on p, from a sharing source holding the words "a b a",
// one of the stateful operators (or, for "narrow", ReduceByKey and
// CountByValue only) keyed by word, with an output collecting the final
// counts in got.
type splitGraph func(p *stream.Pipeline, words *stream.Stream[string], got *counts)

// counts collects the pairs an output sees; the last pair of a key wins.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) add(_ context.Context, b *batch.Batch[stream.Pair[string, int]]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for kv := range b.All() {
		c.m[kv.Key] = kv.Value
	}
	return nil
}

func ones(words *stream.Stream[string]) *stream.Stream[stream.Pair[string, int]] {
	return stream.Map(words, func(w string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: w, Value: 1} })
}

func sum(a, b int) int { return a + b }

// splitGraphs are the stateful operators, each with the op name its error
// names.
var splitGraphs = []struct {
	op    string
	build splitGraph
}{
	{"UpdateStateByKey", func(_ *stream.Pipeline, words *stream.Stream[string], got *counts) {
		st := stream.UpdateStateByKey(ones(words), func(_ string, vs []int, s int, _ bool) (int, bool) { return s + len(vs), true })
		stream.ForEachBatch(st, got.add)
	}},
	{"MapWithState", func(_ *stream.Pipeline, words *stream.Stream[string], got *counts) {
		_, snaps := stream.MapWithState(ones(words), func(_ string, v int, s *stream.State[int]) (int, bool) {
			s.Update(s.Get() + v)
			return 0, false
		})
		stream.ForEachBatch(snaps, got.add)
	}},
	{"ReduceByKeyAndWindow", func(p *stream.Pipeline, words *stream.Stream[string], got *counts) {
		w := stream.ReduceByKeyAndWindow(ones(words), sum, nil, time.Hour, p.BatchInterval())
		stream.ForEachBatch(w, got.add)
	}},
	{"Window", func(p *stream.Pipeline, words *stream.Stream[string], got *counts) {
		w := stream.Window(words, time.Hour, p.BatchInterval())
		stream.ForEachBatch(stream.ReduceByKey(ones(w), sum), got.add)
	}},
}

// runSplit builds a pipeline of cfg with one sharing source (shares, and
// opts given to From) and build, then drains it: it returns Run's error and
// the counts.
func runSplit(t *testing.T, cfg stream.Config, shares bool, build splitGraph, opts ...stream.Option) (map[string]int, error) {
	t.Helper()
	cfg.BatchInterval = time.Second
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := memory.New[string](memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Push("a", "b", "a"); err != nil {
		t.Fatal(err)
	}
	got := &counts{m: map[string]int{}}
	build(p, stream.From(p, sharingSource{Source: src, shares: shares}, opts...), got)
	if err := p.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	err = p.Run(t.Context())
	return got.m, err
}

// A stateful operator on the records of a source whose shards other workers
// share is refused at Run, and by Validate, naming the operator, where it
// was declared, the source and the fixes, and nothing runs.
func TestSplitStateRefused(t *testing.T) {
	for _, g := range splitGraphs {
		t.Run(g.op, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, err := runSplit(t, stream.Config{}, true, g.build)
				if !errors.Is(err, stream.ErrSplitState) || !errors.Is(err, stream.ErrInvalidConfig) {
					t.Fatalf("Run: %v; want ErrSplitState and ErrInvalidConfig", err)
				}
				for _, want := range []string{g.op + " (stream ", "declared at split_test.go:", "source 0 (stream_test)",
					"repartition.ByKey", "stream.PartitionedBy(pairs, partitionKey)", "stream.PartitionedByKey()", "Config.AllowSplitState"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Run: %v\ndoes not say %q", err, want)
					}
				}
				if len(got) != 0 {
					t.Errorf("refused pipeline ran: outputs saw %v", got)
				}
			})
		})
	}
}

// Validate reports the split as Run does, once per stateful operator, and
// names only the sources reaching it through no partitioned stream.
func TestSplitStateValidate(t *testing.T) {
	p, err := stream.NewPipeline(stream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	src := func(shares bool, opts ...stream.Option) *stream.Stream[string] {
		m, err := memory.New[string](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return stream.From(p, sharingSource{Source: m, shares: shares}, opts...)
	}
	declared := src(true, stream.PartitionedByKey(), stream.Named("declared"))
	plain := src(true, stream.Named("plain"))
	private := src(false, stream.Named("private"))
	got := &counts{m: map[string]int{}}
	stream.ForEachBatch(stream.UpdateStateByKey(ones(stream.Union(declared, private)),
		func(_ string, vs []int, s int, _ bool) (int, bool) { return s + len(vs), true }), got.add)
	stream.ForEachBatch(stream.Window(stream.Union(declared, plain, private), time.Hour, time.Second), func(context.Context, *batch.Batch[string]) error { return nil })
	err = p.Validate()
	if !errors.Is(err, stream.ErrSplitState) {
		t.Fatalf("Validate: %v; want ErrSplitState", err)
	}
	if n := strings.Count(err.Error(), stream.ErrSplitState.Error()); n != 1 {
		t.Errorf("Validate: %v\nreports %d splits, want 1 (the Window's)", err, n)
	}
	if msg := err.Error(); !strings.Contains(msg, `Window (stream `) || !strings.Contains(msg, `source 1 (stream_test("plain"))`) ||
		strings.Contains(msg, `"declared"`) || strings.Contains(msg, `"private"`) {
		t.Errorf("Validate: %v\nwant only the Window and source 1 (plain) named", err)
	}
}

// A stateful operator runs when no source shares its shards, when the
// source is declared partitioned by key, or with Config.AllowSplitState; a
// pipeline without state runs on a sharing source.
func TestSplitStateAccepted(t *testing.T) {
	narrow := func(_ *stream.Pipeline, words *stream.Stream[string], got *counts) {
		stream.ForEachBatch(stream.ReduceByKey(ones(words), sum), got.add)
		stream.ForEach(stream.CountByValue(words), func(context.Context, stream.Pair[string, int64]) error { return nil })
	}
	cases := []struct {
		name   string
		cfg    stream.Config
		shares bool
		opts   []stream.Option
	}{
		{name: "not shared"},
		{name: "partitioned by key", shares: true, opts: []stream.Option{stream.PartitionedByKey()}},
		{name: "AllowSplitState", shares: true, cfg: stream.Config{AllowSplitState: true}},
	}
	want := map[string]int{"a": 2, "b": 1}
	for _, c := range cases {
		for _, g := range splitGraphs {
			t.Run(c.name+"/"+g.op, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					got, err := runSplit(t, c.cfg, c.shares, g.build, c.opts...)
					if err != nil {
						t.Fatalf("Run: %v", err)
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("counts (-want +got):\n%s", diff)
					}
				})
			})
		}
	}
	t.Run("narrow only, shared", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got, err := runSplit(t, stream.Config{}, true, narrow)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	})
}
