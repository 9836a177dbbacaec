package kinesis

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
)

// Defaults of the LeaseConfig fields left zero.
const (
	// DefaultLeaseDuration is LeaseConfig.LeaseDuration's default: the
	// Kinesis Client Library's failover time.
	DefaultLeaseDuration = leasetable.DefaultLeaseDuration
	// DefaultCheckpointInterval is LeaseConfig.CheckpointInterval's
	// default (leasetable.DefaultCheckpointInterval, one minute, as the
	// Kinesis Client Library's sample applications checkpoint), or the
	// driver's batch interval when that is longer.
	DefaultCheckpointInterval = leasetable.DefaultCheckpointInterval
)

// LeaseConfig turns on leases and checkpoints (Config.Leases): the shards
// of the stream are shared among every worker (process) running a receiver
// with the same lease table, one lease per shard in a DynamoDB table laid
// out like the Kinesis Client Library's, and each worker commits, every
// CheckpointInterval, how far its shards are safely processed (the records
// of completed batches). A restarted worker, or one taking a shard over,
// reads it after its checkpoint. A KCL application's table is taken over as
// it is. The zero value of each field is its documented default.
//
// The lease settings are those of package leasetable (leasetable.Config),
// embedded: TableName defaults to Config.App, the default DynamoDB
// client is built from Leases.AWS, or else Config.AWS, and Leases.Endpoint,
// and StateDir defaults to the "kinesis-leases" folder of the driver's
// directory recovery log (source.Runtime.StateDir), so that a worker
// restarted after a crash takes its predecessor's leases back at once
// instead of waiting LeaseDuration for them to expire.
// The shard list the leases follow is refreshed every
// Config.ShardSyncInterval.
type LeaseConfig struct {
	leasetable.Config
	// CheckpointInterval is how often every held shard's checkpoint is
	// committed when it moved (never the same number twice; no new data is
	// no problem). A checkpoint is one DynamoDB write per shard, so under
	// load it is most of the lease table's cost: one a minute is about 60
	// writes per shard-hour, one a second 3,600. What it bounds is the
	// duplicates when a shard changes owner without a graceful Stop (a
	// crash without a recovery log, a take-over, a steal): the new owner
	// reads after the checkpoint, so the records of at most one interval
	// are delivered again. A graceful Stop and a shard's end always
	// checkpoint last. Default DefaultCheckpointInterval (1m), or the
	// driver's batch interval (source.Runtime.BatchInterval) if longer.
	CheckpointInterval time.Duration
}

// withDefaults returns l with defaults applied, TableName excepted (see
// table).
func (l LeaseConfig) withDefaults() LeaseConfig {
	l.Config = l.Config.WithDefaults()
	// CheckpointInterval is left zero: its default depends on the Runtime's
	// batch interval, known only when Start runs (see checkpointInterval).
	return l
}

// checkpointInterval returns CheckpointInterval, or by default
// DefaultCheckpointInterval or the driver's batch interval, the longer.
func (l LeaseConfig) checkpointInterval(batchInterval time.Duration) time.Duration {
	if l.CheckpointInterval > 0 {
		return l.CheckpointInterval
	}
	return max(DefaultCheckpointInterval, batchInterval)
}

// table returns the lease table's name: TableName, or app.
func (l LeaseConfig) table(app string) string {
	if l.TableName == "" {
		return app
	}
	return l.TableName
}

// problems returns every problem of l (after withDefaults) in c, each
// naming the field and the fix.
func (l LeaseConfig) problems(c Config) []error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if err := leasetable.ValidateTableName(l.table(c.App)); err != nil {
		if l.TableName == "" {
			add("Leases.TableName is empty, so it defaults to App %q, which is not a valid table name (%v): set Leases.TableName", c.App, err)
		} else {
			add("Leases.TableName: %v", err)
		}
	}
	for _, p := range l.Config.Problems() {
		problems = append(problems, fmt.Errorf("Leases.%w", p))
	}
	if l.CheckpointInterval < 0 {
		add("Leases.CheckpointInterval %v: must be > 0 (0 means the default, %v)", l.CheckpointInterval, DefaultCheckpointInterval)
	}
	return problems
}
