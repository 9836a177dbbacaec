package leasetable

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/durable"
)

// Defaults of Config fields left at zero.
const (
	// DefaultLeaseDuration is the Kinesis Client Library's failover time.
	DefaultLeaseDuration = 10 * time.Second
	// DefaultMaxStealsPerCycle is Config.MaxStealsPerCycle's default: 0,
	// no bound but balance (the KCL's maxLeasesToStealAtOneTime is 1).
	DefaultMaxStealsPerCycle = 0
	// DefaultShardSyncInterval is CoordinatorConfig.ShardSyncInterval's
	// default, KCL's shardSyncIntervalMillis.
	DefaultShardSyncInterval = time.Minute
	// DefaultScanInterval is Config.ScanInterval's default.
	DefaultScanInterval = 10 * time.Minute
	// DefaultCheckpointInterval is how often a lease holder commits its
	// checkpoints by default (kinesis.LeaseConfig.CheckpointInterval): one
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

// Config is the lease protocol's configuration: the table, the worker and
// its timing. It is the one set of lease settings in weir: a Coordinator
// embeds it (CoordinatorConfig), and so does the Kinesis receiver's
// LeaseConfig. The zero value of each field is its documented default.
type Config struct {
	// TableName is the lease table: 3 to 255 of a-z A-Z 0-9 _ . -; created
	// (on-demand billing) if missing. Required by a Coordinator; the
	// Kinesis receiver defaults it to its application name, as the KCL
	// names its table after the application.
	TableName string
	// DynamoDB is the client of the table, usually a *dynamodb.Client. A
	// client given here is used as it is (tests wrap one to hold or count
	// calls). Default: a client built from AWS and Endpoint.
	DynamoDB DynamoDBAPI
	// AWS is the AWS configuration of the default client. Default: the
	// SDK's default configuration (environment, shared files, instance
	// role). The Kinesis receiver passes its own Config.AWS when this is nil.
	AWS *aws.Config
	// Endpoint overrides the DynamoDB endpoint URL of the default client,
	// for example "http://127.0.0.1:4568" for a local server.
	Endpoint string
	// WorkerID names this worker in the table's leaseOwner; it must be
	// unique among the workers sharing the table. Default: host name, pid
	// and 8 random hex digits ("host:4242:1f2e3d4c"), fresh for each
	// process. A restarted worker with a fresh ID cannot renew its
	// predecessor's leases: without StateDir, other workers, or the
	// restarted one, take them only once they expire (LeaseDuration), so a
	// restart pauses its shards for about LeaseDuration; with StateDir the
	// restarted worker takes them back at once.
	//
	// A stable ID (the same after a restart) also avoids most of the pause
	// (the leases it takes back from itself are trusted once its first beat
	// and their renewals succeed, within RenewInterval), and is safe only
	// if two live processes can never use the same ID at once:
	// two of them would both renew, checkpoint and read the same leases,
	// each believing it holds them. Nothing in the table can tell them
	// apart. Set one only when something else guarantees a single process
	// per ID (one per host, each host's ID its own, and a supervisor that
	// never starts a second); StateDir gives the same fast restart without
	// that risk, and is the better choice.
	WorkerID string
	// StateDir, if set, is a local directory where the worker keeps, for
	// each table, a file of the worker IDs that ran on the directory
	// before, under an exclusive lock (flock(2)) held while the Coordinator
	// runs. A worker that gets the lock knows that every worker listed
	// there is gone (each held the lock while it ran, and the kernel
	// releases it only when its process closes it or dies), so it takes
	// their leases back at once, each conditional on the counter it scans,
	// instead of waiting LeaseDuration for them to expire. It must be on a
	// local file system (flock is not reliable over NFS) and used by one
	// deployment of one application: a directory shared by two workers
	// running at once only lets one of them use it (the other logs a
	// warning and does without). Default "": no state. The Kinesis
	// receiver defaults it to the driver's directory recovery log
	// (source.Runtime.StateDir).
	//
	// The directory is created if needed with mode 0700 (StatePerm plus
	// search where read is granted). One that group or others can write,
	// or that another user owns, is refused (logged, as any unusable state
	// directory): a workers file planted there would make this worker take
	// live workers' leases at once. Symbolic links in it are never followed.
	StateDir string
	// StatePerm is the permission of the files in StateDir, filtered by the
	// umask. It must let the owner read and write and must not let group or
	// others write. Default 0600.
	StatePerm fs.FileMode
	// LeaseDuration is how long a lease stays this worker's without a
	// renewal, and how long another worker must see its counter unchanged
	// before taking it. Default DefaultLeaseDuration (10s, KCL's failover
	// time).
	LeaseDuration time.Duration
	// RenewInterval is how often this worker proves it runs: it writes its
	// beat on the table's beat board (one write, whatever it holds), or
	// renews every held lease with RenewEveryLease. It must be shorter than
	// LeaseDuration. Default LeaseDuration/3.
	RenewInterval time.Duration
	// RenewEveryLease renews every held lease each RenewInterval, and
	// judges each lease by its own counter and scans the whole table every
	// TakeInterval, as the KCL does. Set it when KCL workers share the
	// table with weir workers at the same time (a mixed fleet, or a rolling
	// migration), or workers of a weir version before the beat board (a
	// rolling upgrade; set it on both sides): they take a lease whose
	// counter stood still for their failover time. Default false: each worker writes one beat on
	// one shared lease item and the others judge all its leases by it
	// (DESIGN.md, section Leases), which costs one write per worker instead
	// of one per lease and no reads, and a KCL
	// application's table is still taken over as it is once its workers
	// are stopped (their leases expire), as a KCL worker takes over weir's.
	RenewEveryLease bool
	// ScanInterval is, without RenewEveryLease, the longest time between
	// two scans of the whole table: between them a worker judges the
	// others by their beats (read by its own beat, or, without leases, by
	// reading the board each TakeInterval), and scans only when they, its
	// own leases or the shard list call for it. Default
	// DefaultScanInterval (10m).
	ScanInterval time.Duration
	// TakeInterval is the period of take cycles: each judges every other
	// worker by its beat (reading the board if this worker holds no
	// leases), and scans the whole table (one Scan) when that or this
	// worker's leases call for it, or always
	// with RenewEveryLease, to take unowned and expired leases and steal
	// towards balance; the first take cycle runs at start. Default
	// DefaultTakeInterval(LeaseDuration): LeaseDuration/3, the renew
	// period, where KCL scans every 2*LeaseDuration. A dead worker's leases are taken at the first
	// take cycle at least LeaseDuration after this worker saw its last beat
	// (or renewal): more than LeaseDuration and at most
	// ceil(LeaseDuration/TakeInterval)*TakeInterval + TakeInterval after
	// that beat (plus a scan's and a write's latency), which is
	// LeaseDuration + TakeInterval when TakeInterval divides LeaseDuration,
	// as the default does, and always less than LeaseDuration +
	// 2*TakeInterval.
	TakeInterval time.Duration
	// MaxStealsPerCycle bounds the leases stolen from busier workers in one
	// take cycle. Default DefaultMaxStealsPerCycle (0): no bound, a take
	// cycle steals what balance calls for, spread over the busiest
	// workers and leaving none with fewer leases than this worker, so a
	// worker that joins is balanced within two take cycles (the KCL steals
	// one per cycle, its maxLeasesToStealAtOneTime); negative disables
	// stealing.
	MaxStealsPerCycle int
	// MaxLeases caps the leases this worker holds. Default 0: no cap.
	MaxLeases int
	// AttemptTimeout bounds each attempt of every lease-table call (a
	// renewal, take, checkpoint, scan page, table check): an attempt with
	// no answer by then is abandoned, and retried by the client's retryer
	// (the default client's retries it like any transient error). It must
	// be shorter than LeaseDuration. Whatever it is, a write that keeps a
	// lease (renewal, checkpoint) is abandoned when the lease expires on
	// this worker's clock, and the lease then counts as lost: a renewal
	// that cannot complete before expiry never lets a worker believe it
	// still holds a lease others may take. Default LeaseDuration/5 (2s
	// with the default LeaseDuration): a single-item write or a scan page
	// answers in milliseconds, and a renewal (every LeaseDuration/3 by
	// default) that timed out is tried again before its lease expires.
	AttemptTimeout time.Duration
}

// WithDefaults returns c with the defaults of its zero fields applied
// (TableName and DynamoDB excepted: they have no default here).
func (c Config) WithDefaults() Config {
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
func (c Config) Problems() []error {
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
	} {
		if d.v < 0 {
			add("%s %v: must be > 0 (0 means %s)", d.name, d.v, d.def)
		}
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

// Client returns DynamoDB, or a client built from AWS and Endpoint when it
// is nil.
func (c Config) Client(ctx context.Context) (DynamoDBAPI, error) {
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
