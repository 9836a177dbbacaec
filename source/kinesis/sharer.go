package kinesis

import "github.com/weirstream/weir/source"

var _ source.ShardSharer = (*Receiver)(nil)

// SharesShards reports whether the receiver shares the stream's shards with
// other workers through a lease table (Config.Leases is set), reading only
// those it holds a lease on, as they move between workers. It makes the
// receiver a source.ShardSharer.
func (r *Receiver) SharesShards() bool { return r.cfg.Leases != nil }
