package kinesis

import (
	"fmt"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/dynamotable"
	"github.com/weirstream/weir/internal/lease"
)

// checkpointInterval returns l.CheckpointInterval, or by default
// lease.DefaultCheckpointInterval or the driver's batch interval, the
// longer: its default depends on the Runtime's batch interval, known only
// when Start runs.
func checkpointInterval(l leasetable.Config, batchInterval time.Duration) time.Duration {
	if l.CheckpointInterval > 0 {
		return l.CheckpointInterval
	}
	return max(lease.DefaultCheckpointInterval, batchInterval)
}

// leaseTable returns the lease table's name: l.TableName, or app.
func leaseTable(l leasetable.Config, app string) string {
	if l.TableName == "" {
		return app
	}
	return l.TableName
}

// leaseProblems returns every problem of l (after lease.WithDefaults) in
// c, each naming the field and the fix.
func leaseProblems(l leasetable.Config, c Config) []error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if err := dynamotable.CheckName(leaseTable(l, c.App)); err != nil {
		if l.TableName == "" {
			add("Leases.TableName is empty, so it defaults to App %q, which is not a valid table name (%v): set Leases.TableName", c.App, err)
		} else {
			add("Leases.TableName: %v", err)
		}
	}
	for _, p := range lease.Problems(l) {
		problems = append(problems, fmt.Errorf("Leases.%w", p))
	}
	if err := lease.CheckClient(l); err != nil {
		problems = append(problems, fmt.Errorf("Leases.%w", err))
	}
	return problems
}
