package kinesis

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/checkpoint"
)

// Defaults of the LeaseConfig fields left zero.
const (
	// DefaultLeaseDuration is LeaseConfig.LeaseDuration's default: the
	// Kinesis Client Library's failover time.
	DefaultLeaseDuration = checkpoint.DefaultLeaseDuration
	// DefaultCheckpointInterval is LeaseConfig.CheckpointInterval's
	// fallback when the driver does not give its batch interval
	// (source.Runtime.BatchInterval zero): the driver's default batch
	// interval (stream.DefaultBatchInterval).
	DefaultCheckpointInterval = time.Second
	// DefaultMaxStealsPerCycle is LeaseConfig.MaxStealsPerCycle's default.
	DefaultMaxStealsPerCycle = checkpoint.DefaultMaxStealsPerCycle
)

// LeaseConfig turns on leases and checkpoints (Config.Leases): the shards
// of the stream are shared among every worker (process) running a receiver
// with the same lease table, one lease per shard in a DynamoDB table laid
// out like the Kinesis Client Library's, and each worker commits, every
// CheckpointInterval, how far its shards are safely processed (DESIGN.md,
// Data flow step 6). A restarted worker, or one taking a shard over, reads
// it after its checkpoint. A KCL application's table is taken over as it
// is. The zero value of each field is its documented default.
type LeaseConfig struct {
	// TableName is the lease table: 3 to 255 of a-z A-Z 0-9 _ . -; created
	// (on-demand billing) if missing. Default: Config.App, as the KCL names
	// its table after the application.
	TableName string
	// DynamoDB is the client of the lease table. Default: a
	// dynamodb.Client built from Config.AWS (or the default AWS
	// configuration) and Endpoint. A client given here is used as it is;
	// tests wrap one to hold or count calls.
	DynamoDB checkpoint.DynamoDBAPI
	// Endpoint overrides the DynamoDB endpoint URL of the default client,
	// for example "http://127.0.0.1:4568" for a local server. Default: the
	// AWS configuration's endpoint.
	Endpoint string
	// WorkerID names this worker in the table's leaseOwner; it must be
	// unique among the workers sharing the table. Default: host name, pid
	// and 8 random hex digits ("host:4242:1f2e3d4c"), fresh for each New, so
	// a restarted process never mistakes itself for the previous one.
	WorkerID string
	// LeaseDuration is how long a lease stays this worker's without a
	// renewal, and how long other workers wait for a silent worker's leases
	// before taking them. Default 10s (KCL's failover time).
	LeaseDuration time.Duration
	// RenewInterval is how often held leases are renewed; it must be
	// shorter than LeaseDuration. Default LeaseDuration/3.
	RenewInterval time.Duration
	// TakeInterval is how often the table is scanned (the whole table, one
	// item per shard) to take expired or unowned leases and steal towards
	// an even spread; the first scan runs at start. Default
	// LeaseDuration/3 rounded up to the nanosecond
	// (checkpoint.DefaultTakeInterval), the renew period, where KCL scans
	// every 2*LeaseDuration: with the defaults, 3 workers starting together
	// on 8 shards each hold 2 or 3 within 2*LeaseDuration. A lease counts
	// as expired once a scan finds its counter unchanged for LeaseDuration
	// since the scan that first saw it, so a dead worker's shards are taken
	// over more than LeaseDuration and at most LeaseDuration + TakeInterval
	// after its last renewal when TakeInterval divides LeaseDuration (the
	// default), less than LeaseDuration + 2*TakeInterval otherwise, plus a
	// scan's and a write's latency.
	TakeInterval time.Duration
	// MaxStealsPerCycle bounds the leases stolen from a busier worker in
	// one take cycle. Default 1, as KCL's maxLeasesToStealAtOneTime;
	// negative disables stealing.
	MaxStealsPerCycle int
	// MaxLeases caps the leases this worker holds. Default 0: no cap.
	MaxLeases int
	// CheckpointInterval is how often every held shard's checkpoint is
	// committed when it moved (never the same number twice; no new data is
	// no problem). Default: the driver's batch interval
	// (source.Runtime.BatchInterval), or 1s (DefaultCheckpointInterval)
	// when the driver does not give one.
	CheckpointInterval time.Duration
}

// withDefaults returns l with defaults applied, TableName excepted (see
// table).
func (l LeaseConfig) withDefaults() LeaseConfig {
	if l.WorkerID == "" {
		l.WorkerID = defaultWorkerID()
	}
	if l.LeaseDuration == 0 {
		l.LeaseDuration = DefaultLeaseDuration
	}
	if l.RenewInterval == 0 && l.LeaseDuration > 0 {
		l.RenewInterval = l.LeaseDuration / 3
	}
	if l.TakeInterval == 0 && l.LeaseDuration > 0 {
		l.TakeInterval = checkpoint.DefaultTakeInterval(l.LeaseDuration)
	}
	if l.MaxStealsPerCycle == 0 {
		l.MaxStealsPerCycle = DefaultMaxStealsPerCycle
	}
	// CheckpointInterval is left zero: its default is the Runtime's batch
	// interval, known only when Start runs (see checkpointInterval).
	return l
}

// checkpointInterval returns CheckpointInterval, or by default the driver's
// batch interval, or DefaultCheckpointInterval when that is zero too.
func (l LeaseConfig) checkpointInterval(batchInterval time.Duration) time.Duration {
	switch {
	case l.CheckpointInterval > 0:
		return l.CheckpointInterval
	case batchInterval > 0:
		return batchInterval
	}
	return DefaultCheckpointInterval
}

// defaultWorkerID returns host:pid:random.
func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:])
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
	if err := checkpoint.ValidateTableName(l.table(c.App)); err != nil {
		if l.TableName == "" {
			add("Leases.TableName is empty, so it defaults to App %q, which is not a valid table name (%v): set Leases.TableName", c.App, err)
		} else {
			add("Leases.TableName: %v", err)
		}
	}
	if l.Endpoint != "" && !strings.HasPrefix(l.Endpoint, "http://") && !strings.HasPrefix(l.Endpoint, "https://") {
		add("Leases.Endpoint %q: must be a URL starting with http:// or https://", l.Endpoint)
	}
	if strings.TrimSpace(l.WorkerID) == "" {
		add("Leases.WorkerID %q: must name this worker (leave it empty for host:pid:random)", l.WorkerID)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		def  string
	}{
		{"LeaseDuration", l.LeaseDuration, DefaultLeaseDuration.String()},
		{"RenewInterval", l.RenewInterval, "LeaseDuration/3"},
		{"TakeInterval", l.TakeInterval, "LeaseDuration/3"},
		{"CheckpointInterval", l.CheckpointInterval, "the driver's batch interval"},
	} {
		if d.v < 0 {
			add("Leases.%s %v: must be > 0 (0 means %s)", d.name, d.v, d.def)
		}
	}
	if l.LeaseDuration > 0 && l.RenewInterval >= l.LeaseDuration {
		add("Leases.LeaseDuration %v: must be longer than RenewInterval %v, or the lease expires between two renewals (LeaseDuration/3 is usual)",
			l.LeaseDuration, l.RenewInterval)
	}
	if l.MaxLeases < 0 {
		add("Leases.MaxLeases %d: must be >= 0 (0 means no cap)", l.MaxLeases)
	}
	if c.Assigner != nil {
		add("Assigner is set with Leases: the leases decide which shards this worker reads; set one or the other")
	}
	if c.StartAfter != nil {
		add("StartAfter is set with Leases: the lease table holds the checkpoints; set one or the other")
	}
	return problems
}
