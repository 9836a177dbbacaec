package stream_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/lineage"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// SharesShards is true in the outputs of a pipeline with a source sharing
// its shards, false in those of one without, and false outside a pipeline.
func TestSharesShards(t *testing.T) {
	if stream.SharesShards(t.Context()) {
		t.Error("SharesShards outside a pipeline: true")
	}
	for _, shares := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var got []bool
			_, err := runSplit(t, stream.Config{}, shares, func(_ *stream.Pipeline, words *stream.Stream[string], _ *counts) {
				stream.ForEachBatch(words, func(ctx context.Context, _ *batch.Batch[string]) error {
					got = append(got, stream.SharesShards(ctx))
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Fatal("the output never ran")
			}
			for _, g := range got {
				if g != shares {
					t.Errorf("source sharing %v: SharesShards in an output = %v", shares, g)
				}
			}
		})
	}
}

// leasingSource is a memory source that holds leases as a Kinesis receiver
// with leases does.
type leasingSource struct {
	*memory.Source[string]
	leases []leasetable.Lease
}

// ShardAncestors names the parents of the shards of "src" it holds, as
// their ancestors.
func (s leasingSource) ShardAncestors(stream string) map[string][]string {
	if stream != "src" {
		return nil
	}
	out := map[string][]string{}
	for _, l := range s.leases {
		if len(l.Parents) > 0 {
			out[l.Shard] = l.Parents
		}
	}
	return out
}

// The context a pipeline gives its outputs names the ancestors of the
// shards its source holds leases on, as the source names them (what
// sink/dynamodb fences an ancestor's late writes with), and none of a
// shard without parents or of another stream, or outside a pipeline.
func TestOutputsSeeShardAncestors(t *testing.T) {
	if got := lineage.Ancestors(t.Context(), "src"); got != nil {
		t.Errorf("Ancestors outside a pipeline: %q", got)
	}
	synctest.Test(t, func(t *testing.T) {
		p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[string](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Push("a"); err != nil {
			t.Fatal(err)
		}
		leases := []leasetable.Lease{{Shard: "a"}, {Shard: "c", Parents: []string{"a", "b"}}}
		var got []map[string][]string
		stream.ForEachBatch(stream.From(p, leasingSource{Source: src, leases: leases}), func(ctx context.Context, b *batch.Batch[string]) error {
			if b.Len() > 0 {
				got = append(got, lineage.Ancestors(ctx, "src"), lineage.Ancestors(ctx, "other"))
			}
			return nil
		})
		if err := p.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]map[string][]string{{"c": {"a", "b"}}, nil}, got); diff != "" {
			t.Errorf("ancestors of src's and another stream's shards (-want +got):\n%s", diff)
		}
	})
}
