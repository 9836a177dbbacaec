package lease

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/durable"
	"github.com/weirstream/weir/internal/dynamotable"
)

// Defaults of leasetable.Config fields left at zero.
const (
	// DefaultLeaseDuration is the Kinesis Client Library's failover time.
	DefaultLeaseDuration = 10 * time.Second
	// minLeaseDuration is the shortest LeaseDuration accepted.
	minLeaseDuration = time.Second
	// DefaultMaxStealsPerCycle is leasetable.Config.MaxStealsPerCycle's default: 0,
	// no bound but balance (the KCL's maxLeasesToStealAtOneTime is 1).
	DefaultMaxStealsPerCycle = 0
	// DefaultShardSyncInterval is CoordinatorConfig.ShardSyncInterval's
	// default, KCL's shardSyncIntervalMillis.
	DefaultShardSyncInterval = time.Minute
	// DefaultScanInterval is leasetable.Config.ScanInterval's default.
	DefaultScanInterval = 10 * time.Minute
	// DefaultCheckpointInterval is how often a lease holder commits its
	// checkpoints by default (leasetable.Config.CheckpointInterval): one
	// minute, as the Kinesis Client Library's sample applications
	// checkpoint. Under load a checkpoint is one write per shard, so this
	// period sets most of the table's cost (DESIGN.md, section Leases).
	DefaultCheckpointInterval = time.Minute
)

// DefaultTakeInterval returns the default TakeInterval for a lease duration:
// leaseDuration/3, rounded up to the nanosecond so that three take periods
// are never shorter than leaseDuration. Rounded down, the third scan after
// a worker's last renewal would find its leases 1ns short of expiry, and the
// take-over would wait for a fourth.
func DefaultTakeInterval(leaseDuration time.Duration) time.Duration {
	return (leaseDuration + 2) / 3
}

// WithDefaults returns c with the defaults of its zero fields applied
// (TableName, DynamoDB and CheckpointInterval excepted: their defaults are
// the Kinesis receiver's).
func WithDefaults(c leasetable.Config) leasetable.Config {
	if c.WorkerID == "" {
		c.WorkerID = NewWorkerID()
	}
	c.LeaseDuration = cmp.Or(c.LeaseDuration, DefaultLeaseDuration)
	if c.RenewInterval == 0 && c.LeaseDuration > 0 {
		c.RenewInterval = c.LeaseDuration / 3
	}
	if c.TakeInterval == 0 && c.LeaseDuration > 0 {
		c.TakeInterval = DefaultTakeInterval(c.LeaseDuration)
	}
	c.MaxStealsPerCycle = cmp.Or(c.MaxStealsPerCycle, DefaultMaxStealsPerCycle)
	if c.AttemptTimeout == 0 && c.LeaseDuration > 0 {
		c.AttemptTimeout = c.LeaseDuration / 5
	}
	c.ScanInterval = cmp.Or(c.ScanInterval, DefaultScanInterval)
	return c
}

// Problems returns every problem of c (after WithDefaults), each naming the
// field and the fix; the table name and client are not checked (see
// CoordinatorConfig).
func Problems(c leasetable.Config) []error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if err := awsconf.CheckEndpoint("Endpoint", c.Endpoint); err != nil {
		problems = append(problems, err)
	}
	if err := durable.CheckPerm("StatePerm", c.StatePerm); err != nil {
		problems = append(problems, err)
	}
	if strings.TrimSpace(c.WorkerID) == "" {
		add("WorkerID %q: must name this worker (leave it empty for host:pid:random)", c.WorkerID)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		def  string
	}{
		{"LeaseDuration", c.LeaseDuration, DefaultLeaseDuration.String()},
		{"RenewInterval", c.RenewInterval, "LeaseDuration/3"},
		{"TakeInterval", c.TakeInterval, "LeaseDuration/3"},
		{"AttemptTimeout", c.AttemptTimeout, "LeaseDuration/5"},
		{"ScanInterval", c.ScanInterval, DefaultScanInterval.String()},
		{"CheckpointInterval", c.CheckpointInterval, "the default, " + DefaultCheckpointInterval.String()},
	} {
		if d.v < 0 {
			add("%s %v: must be > 0 (0 means %s)", d.name, d.v, d.def)
		}
		if d.v > 0 && d.v < time.Millisecond && d.name != "LeaseDuration" {
			// Seconds meant and nanoseconds written: calls to DynamoDB
			// back to back, or bounded too short to ever answer.
			add("%s %v: must be at least 1ms (0 means %s); write a duration in seconds as n * time.Second", d.name, d.v, d.def)
		}
	}
	if c.LeaseDuration > 0 && c.LeaseDuration < minLeaseDuration {
		// Most likely seconds meant and nanoseconds written: renewals
		// every few nanoseconds, each call bounded by LeaseDuration/5
		// (AttemptTimeout's default), could never complete in time.
		add("LeaseDuration %v: must be at least %v, to outlast the DynamoDB calls that renew it; write a duration in seconds as n * time.Second",
			c.LeaseDuration, minLeaseDuration)
	}
	if c.LeaseDuration > 0 && c.RenewInterval >= c.LeaseDuration {
		add("RenewInterval %v: must be shorter than LeaseDuration %v, or the lease expires between two renewals (LeaseDuration/3 is usual)",
			c.RenewInterval, c.LeaseDuration)
	}
	if c.LeaseDuration > 0 && c.AttemptTimeout >= c.LeaseDuration {
		add("AttemptTimeout %v: must be shorter than LeaseDuration %v, or a renewal could outlast its lease (LeaseDuration/5 is usual)",
			c.AttemptTimeout, c.LeaseDuration)
	}
	if c.MaxLeases < 0 {
		add("MaxLeases %d: must be >= 0 (0 means no cap)", c.MaxLeases)
	}
	return problems
}

// CheckClient reports a DynamoDB client given in c, a user's Config, with
// the AWS or Endpoint it would ignore. It is not part of Problems, which
// also checks the Config a receiver completes with its own AWS and client.
func CheckClient(c leasetable.Config) error {
	return awsconf.CheckClient("DynamoDB", c.DynamoDB != nil, c.AWS != nil, c.Endpoint)
}

// Client returns DynamoDB, or a client built from AWS and Endpoint when it
// is nil.
func Client(ctx context.Context, c leasetable.Config) (leasetable.DynamoDBAPI, error) {
	if c.DynamoDB != nil {
		return c.DynamoDB, nil
	}
	db, err := awsconf.DynamoDB(ctx, c.AWS, c.Endpoint, "the lease table (set DynamoDB or AWS to avoid it)")
	if err != nil {
		return nil, fmt.Errorf("leasetable: %w", err)
	}
	return db, nil
}

// NewWorkerID returns a fresh worker ID: host name, pid and 8 random hex
// digits ("host:4242:1f2e3d4c").
func NewWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:])
}

// OpenTable returns the Table cfg names, for reading: cfg.TableName is
// required, the client is cfg.DynamoDB or one built from cfg.AWS and
// cfg.Endpoint (Client), each call bounded by cfg.AttemptTimeout (default
// LeaseDuration/5). The other settings are not used. It makes no call to
// the table.
func OpenTable(ctx context.Context, cfg leasetable.Config) (*Table, error) {
	cfg = WithDefaults(cfg)
	var problems []error
	if cfg.TableName == "" {
		problems = append(problems, errors.New("TableName is empty: set it to the lease table's name (the Kinesis receiver's default is its App)"))
	} else if err := dynamotable.CheckName(cfg.TableName); err != nil {
		problems = append(problems, fmt.Errorf("TableName: %w", err))
	}
	if err := awsconf.CheckEndpoint("Endpoint", cfg.Endpoint); err != nil {
		problems = append(problems, err)
	}
	if err := CheckClient(cfg); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %w", leasetable.ErrInvalidConfig, errors.Join(problems...))
	}
	db, err := Client(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return NewTable(TableConfig{Name: cfg.TableName, Client: db, AttemptTimeout: cfg.AttemptTimeout})
}
