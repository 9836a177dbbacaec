package repartition

import (
	"context"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/origin"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// deduplicate is the reading side's one deduplication step: it drops the
// copies a replayed batch wrote again, by their origin tags, and strips the
// tags. It stands in for sink/kinesis's crash-exact Deduplicate, which
// keeps its filters in the pipeline's state: replace this variable's value
// with it once merged.
var deduplicate = filterTags

// filterTags drops copies with an origin.Filter per shard, kept in memory:
// exact within one process, not across a restart (whose filters start
// empty, so copies read again then are kept: duplicates, never losses)
// nor a lease moving. A batch computed again (a retry) is filtered from
// the filters' state before its first computation.
func filterTags(s *stream.Stream[source.Record]) *stream.Stream[source.Record] {
	var (
		filters = map[string]*origin.Filter{} // by shard
		at      batch.Time                    // the batch filters was last advanced by
		before  map[string][]byte             // filters before at, encoded
	)
	return stream.Transform(s, func(_ context.Context, b *batch.Batch[source.Record]) (*batch.Batch[source.Record], error) {
		switch {
		case b.Time() == at && before != nil:
			filters = map[string]*origin.Filter{}
			for shard, enc := range before {
				f := origin.NewFilter(0)
				if err := f.UnmarshalBinary(enc); err != nil {
					return nil, err
				}
				filters[shard] = f
			}
		case b.Time() < at:
			// An older batch again: nothing proves its records copies.
			filters = map[string]*origin.Filter{}
		}
		before = make(map[string][]byte, len(filters))
		for shard, f := range filters {
			enc, err := f.MarshalBinary()
			if err != nil {
				return nil, err
			}
			before[shard] = enc
		}
		at = b.Time()
		parts := make([][]source.Record, 0, len(b.Parts()))
		for _, part := range b.Parts() {
			out := make([]source.Record, 0, len(part))
			for _, r := range part {
				tag, payload, ok, err := origin.Decode(r.Data)
				if ok && err == nil {
					f := filters[r.ShardID]
					if f == nil {
						f = origin.NewFilter(0)
						filters[r.ShardID] = f
					}
					if !f.Keep(tag) {
						continue
					}
					r.Data = payload
				}
				out = append(out, r)
			}
			parts = append(parts, out)
		}
		return batch.Derive(b, parts...), nil
	})
}
