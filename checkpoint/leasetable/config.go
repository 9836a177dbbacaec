package leasetable

import (
	"context"
	"io/fs"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Config is the one set of lease settings in weir: the table, the worker,
// its timing and how often it checkpoints. Setting kinesis.Config.Leases to
// one turns leases and checkpoints on: the shards of the stream are shared
// among every worker (process) running a receiver with the same lease
// table, one lease per shard in a DynamoDB table laid out like the Kinesis
// Client Library's, and each worker commits, every CheckpointInterval, how
// far its shards are safely processed (the records of completed batches).
// A restarted worker, or one taking a shard over, reads after the
// checkpoint. A KCL application's table is taken over as it is.
//
// The zero value of each field is its documented default; a Config{} is a
// working configuration whose table is named after the receiver's App.
type Config struct {
	// TableName is the lease table: 3 to 255 of a-z A-Z 0-9 _ . -; created
	// (on-demand billing) if missing. An existing table must be keyed by a
	// string hash key leaseKey alone, as the KCL's is; another is refused
	// at start. A pipeline keeping state per shard also keeps a table named
	// TableName + "-state", so its TableName has at most 249 characters
	// (the Kinesis receiver refuses a longer one when it starts). Default:
	// the Kinesis receiver's App, as the KCL names its table after the
	// application.
	TableName string
	// DynamoDB is the client of the table, usually a *dynamodb.Client
	// configured as the program needs (retries, HTTP client). A client
	// given here is used as it is, so AWS and Endpoint, which it would
	// ignore, must then be left unset. Default: a client built from AWS
	// and Endpoint.
	DynamoDB DynamoDBAPI
	// AWS is the AWS configuration of the default client. Default: the
	// Kinesis receiver's Config.AWS, or else the SDK's default
	// configuration (environment, shared files, instance role).
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
	// before, under an exclusive lock (flock(2)) held while the worker
	// runs. A worker that gets the lock knows that every worker listed
	// there is gone (each held the lock while it ran, and the kernel
	// releases it only when its process closes it or dies), so it takes
	// their leases back at once, each conditional on the counter it scans,
	// instead of waiting LeaseDuration for them to expire. It must be on a
	// local file system (flock is not reliable over NFS) and used by one
	// deployment of one application: a directory shared by two workers
	// running at once only lets one of them use it (the other waits up to
	// LeaseDuration for it, as for a predecessor that is still exiting,
	// with a warning, then logs another and does without). A folder next
	// to the pipeline's recovery log, or the log's own directory, is a
	// good place.
	//
	// Default "": no state, so a restarted worker waits about
	// LeaseDuration for its predecessor's leases to expire before it, or
	// another worker, reads their shards again. weir never picks a
	// directory itself: a directory two deployments shared by accident,
	// or one on a network file system, would be worse than the pause.
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
	// before taking it. At least 1s. Default 10s, the Kinesis Client
	// Library's failover time.
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
	// counter stood still for their failover time. Default false: each
	// worker writes one beat on one shared lease item and the others judge
	// all its leases by it (DESIGN.md, section Leases), which costs one
	// write per worker instead of one per lease and no reads, and a KCL
	// application's table is still taken over as it is once its workers
	// are stopped (their leases expire), as a KCL worker takes over weir's.
	RenewEveryLease bool
	// ScanInterval is, without RenewEveryLease, the longest time between
	// two scans of the whole table: between them a worker judges the
	// others by their beats (read by its own beat, or, without leases, by
	// reading the board each TakeInterval), and scans only when they, its
	// own leases or the shard list call for it. Default 10m.
	ScanInterval time.Duration
	// TakeInterval is the period of take cycles: each judges every other
	// worker by its beat (reading the board if this worker holds no
	// leases), and scans the whole table (one Scan) when that or this
	// worker's leases call for it, or always with RenewEveryLease, to take
	// unowned and expired leases and steal towards balance; the first take
	// cycle runs at start. Default LeaseDuration/3 (rounded up to the
	// nanosecond), the renew period, where KCL scans every
	// 2*LeaseDuration. A dead worker's leases are taken at the first take
	// cycle at least LeaseDuration after this worker saw its last beat (or
	// renewal): more than LeaseDuration and at most
	// ceil(LeaseDuration/TakeInterval)*TakeInterval + TakeInterval after
	// that beat (plus a scan's and a write's latency), which is
	// LeaseDuration + TakeInterval when TakeInterval divides LeaseDuration,
	// as the default does, and always less than LeaseDuration +
	// 2*TakeInterval.
	TakeInterval time.Duration
	// MaxStealsPerCycle bounds the leases stolen from busier workers in one
	// take cycle. Default 0: no bound, a take cycle steals what balance
	// calls for, spread over the busiest workers and leaving none with
	// fewer leases than this worker, so a worker that joins is balanced
	// within two take cycles (the KCL steals one per cycle, its
	// maxLeasesToStealAtOneTime); negative disables stealing.
	MaxStealsPerCycle int
	// MaxLeases caps the leases this worker holds. Default 0: no cap.
	MaxLeases int
	// AttemptTimeout bounds each attempt of every lease-table call (a
	// renewal, take, checkpoint, scan page, table check), and of every call
	// to the shard state table of a pipeline keeping state per shard (the
	// table's name + "-state": a snapshot's save or load): an attempt with
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
	// CheckpointInterval is how often every held shard's checkpoint is
	// committed when it moved (never the same number twice; no new data is
	// no problem). A checkpoint is one DynamoDB write per shard, so under
	// load it is most of the lease table's cost: one a minute is about 60
	// writes per shard-hour, one a second 3,600. What it bounds is the
	// duplicates when a shard changes owner without a graceful Stop (a
	// crash without a recovery log, a take-over, a steal): the new owner
	// reads after the checkpoint, so the records of at most one interval
	// are delivered again. A graceful Stop and a shard's end always
	// checkpoint last. Default 1m, as the Kinesis Client Library's sample
	// applications checkpoint, or the pipeline's batch interval if longer.
	CheckpointInterval time.Duration
}

// DynamoDBAPI is the part of *dynamodb.Client the lease table uses
// (Config.DynamoDB). A program may wrap a client, to count or hold calls.
type DynamoDBAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}
