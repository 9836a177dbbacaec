package stream

import (
	"context"
	"slices"

	"github.com/weirstream/weir/checkpoint/leasetable"
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

// leaseHolder is a receiver that reads its stream's shards under leases,
// which name each shard's parents: weir's Kinesis receiver.
type leaseHolder interface {
	StreamName() string
	HeldLeases() []leasetable.Lease
}

// shardParents returns the parents of the shards of stream that the
// sources of p hold leases on, by shard ID, as the leases name them (the
// first source holding a shard's lease wins), nil if none. It is the
// lineage.Func of the contexts p gives its outputs (see Run): one call
// copies every lease held, once per batch.
func (p *Pipeline) shardParents(stream string) map[string][]string {
	p.mu.Lock()
	srcs := slices.Clone(p.sources)
	p.mu.Unlock()
	var parents map[string][]string
	for _, s := range srcs {
		h, ok := s.receiver().(leaseHolder)
		if !ok || h.StreamName() != stream {
			continue
		}
		for _, l := range h.HeldLeases() {
			if _, seen := parents[l.Shard]; len(l.Parents) == 0 || seen {
				continue
			}
			if parents == nil {
				parents = make(map[string][]string)
			}
			parents[l.Shard] = l.Parents
		}
	}
	return parents
}
