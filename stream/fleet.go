package stream

import (
	"context"
	"slices"

	"github.com/weirstream/weir/source"
)

// SharesShards reports whether ctx is a context a running Pipeline gave
// (an output's function gets one) and that Pipeline reads a source whose
// receiver shares its shards with other workers: a source.ShardSharer
// reporting true, such as a Kinesis receiver with Config.Leases. An output
// whose exactly-once rests on one worker's batch times checks it to
// refuse, or name apart, what a fleet would otherwise lose: sink/dynamodb
// and sink/kinesis do. It reports false for any other ctx. It is safe for
// concurrent use.
func SharesShards(ctx context.Context) bool {
	p, _ := ctx.Value(pipelineKey{}).(*Pipeline)
	if p == nil {
		return false
	}
	p.mu.Lock()
	srcs := slices.Clone(p.sources)
	p.mu.Unlock()
	for _, s := range srcs {
		if sh, ok := s.receiver().(source.ShardSharer); ok && sh.SharesShards() {
			return true
		}
	}
	return false
}

// HasRecovery reports whether ctx is a context a running Pipeline gave (an
// output's function gets one) and that Pipeline has a recovery log
// (Config.Recovery): its batch times never repeat, across Runs, and a batch
// run again after a crash has the same time and records. An output that
// takes a batch time it wrote before for that batch checks it: sink/files
// and sink/deadletter do, and without a log compare what they wrote;
// sink/deadletter/dynamodb and sink/kinesis then name their letters and
// origin tags by the Run. It reports false for any other ctx. It is safe
// for concurrent use.
func HasRecovery(ctx context.Context) bool {
	p, _ := ctx.Value(pipelineKey{}).(*Pipeline)
	return p != nil && p.cfg.Recovery != nil
}

// shardAncestors returns the ancestors of the shards of stream that the
// sources of p know ancestors of (source.ShardLineage: a Kinesis receiver,
// of the shards it holds leases on), by shard ID, each shard's nearest
// first (the first source that names a shard's wins), nil if none. It is
// the lineage.Func of the contexts p gives its outputs (see Run): one call
// may walk every lease held, once per batch.
func (p *Pipeline) shardAncestors(stream string) map[string][]string {
	p.mu.Lock()
	srcs := slices.Clone(p.sources)
	p.mu.Unlock()
	var ancestors map[string][]string
	for _, s := range srcs {
		sl, ok := s.receiver().(source.ShardLineage)
		if !ok {
			continue
		}
		for shard, as := range sl.ShardAncestors(stream) {
			if _, seen := ancestors[shard]; len(as) == 0 || seen {
				continue
			}
			if ancestors == nil {
				ancestors = make(map[string][]string)
			}
			ancestors[shard] = as
		}
	}
	return ancestors
}
