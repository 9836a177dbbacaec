package stream_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/weirstream/weir/batch"
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
