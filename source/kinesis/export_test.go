package kinesis

import (
	"context"
	"time"

	"github.com/weirstream/weir/batch"
)

// Servers gives the tests of package kinesis_test the package's shared
// local servers (one test binary, one TestMain).
var Servers = servers

// OnEndCheck makes r call f each time its lease side judges a shard read
// to its end: ready to be marked SHARD_END, or still waiting for records
// to complete. Call it before Start.
func OnEndCheck(r *Receiver, f func(shard string, ready bool)) { r.endChecked = f }

// OnShardEnd makes a receiver built from cfg call f once for each shard a
// reader read to its end, after every block holding its records was stored
// (see Config.onShardEnd).
func OnShardEnd(cfg *Config, f func(ctx context.Context, shard, lastSeq string)) {
	cfg.onShardEnd = f
}

// ReadRate returns the read rate backpressure set (see Receiver.readRate).
func ReadRate(r *Receiver) float64 { return r.readRate() }

// BlocksCompleted tells r that blocks completed, as the driver does
// through the hooks r registers in Start.
func BlocksCompleted(r *Receiver, blocks []batch.BlockInfo) {
	r.blocksCompleted(context.Background(), blocks)
}

// ForgetShardsAfter makes a receiver built from cfg forget a shard d after
// it stopped reading it for good, in place of 10 minutes.
func ForgetShardsAfter(cfg *Config, d time.Duration) { cfg.forgetAfter = d }

// OnForgetCheck makes r call f each time its lease side judges a shard
// another worker finished, which its recovery log may hold, or, without
// leases, each time it judges a finished shard its log may hold: ready to
// be logged finished, or still waiting (for records to complete, or for
// the shard to leave the listing or a child of it to hold a position in
// the log). Call it before Start.
func OnForgetCheck(r *Receiver, f func(shard string, ready bool)) { r.forgetChecked = f }
