package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/lease"
)

// ErrInvalidConfig is wrapped by the error New returns for a Config it cannot
// use; the message lists every problem, each naming the field and the fix.
var ErrInvalidConfig = errors.New("kinesis: invalid config")

// Defaults for the Config fields left zero.
const (
	// defaultRecordsPerRead is the GetRecords Limit when Config.RecordsPerRead
	// is zero: the most Kinesis allows.
	defaultRecordsPerRead = 10000
	// maxRecordsPerRead is the largest Limit GetRecords accepts.
	maxRecordsPerRead = 10000
	// defaultPollInterval is the wait, when Config.PollInterval is zero,
	// after a GetRecords call that found nothing new (empty, or caught up
	// with the tip of the shard). Kinesis allows 5 GetRecords calls per
	// second per shard, shared by every consumer of the stream: polling an
	// idle shard every 500ms uses 2 of them and leaves the rest to other
	// applications.
	defaultPollInterval = 500 * time.Millisecond
	// defaultMinReadInterval is the least time between the starts of two
	// GetRecords calls on one shard when Config.MinReadInterval is zero:
	// 200ms, Kinesis's limit of 5 calls per second per shard.
	defaultMinReadInterval = 200 * time.Millisecond
	// defaultShardSyncInterval is how often the shard list is re-read, to
	// find shards made by a reshard, when Config.ShardSyncInterval is zero.
	defaultShardSyncInterval = 10 * time.Second
	// defaultRetryBaseDelay is the first back-off after a throttled or
	// failed call when Config.RetryBaseDelay is zero.
	defaultRetryBaseDelay = 100 * time.Millisecond
	// defaultRetryMaxDelay caps the back-off when Config.RetryMaxDelay is zero.
	defaultRetryMaxDelay = 5 * time.Second
	// defaultRecomputeTimeout bounds one Recompute call when
	// Config.RecomputeTimeout is zero.
	defaultRecomputeTimeout = time.Minute
	// defaultAttemptTimeout bounds one attempt of a Kinesis call when
	// Config.AttemptTimeout is zero. A healthy GetRecords answers in tens
	// of milliseconds; its largest answer, 10 MiB, takes under 10 s at
	// 10 Mbit/s. The Kinesis Client Library waits 30 s for a GetRecords
	// call, its SDK retries included.
	defaultAttemptTimeout = 10 * time.Second
	// defaultMaxAttempts bounds the attempts of each Kinesis call made by
	// Recompute and by Start's stream check when Config.MaxAttempts is zero.
	defaultMaxAttempts = 20
)

// InitialPosition is where a shard reader starts when no starting sequence
// number is known for the shard: no checkpoint (Config.Leases), and nothing
// of it in the driver's recovery log.
type InitialPosition string

// The initial positions. They are the Kinesis shard iterator types of the
// same names.
const (
	// Latest starts after the newest record: only records put from now on
	// are read. It is the default, as in the Kinesis Client Library. With
	// Leases, a lease's first take pins "now" in the lease table, and
	// every owner reads the shard from that time (a few seconds before)
	// until its first checkpoint, so a worker that dies before its first
	// checkpoint loses nothing. Likewise, a reader that needs a new
	// iterator (or subscription) before it read its first record, because
	// the first one expired unused or failed, starts at the time it first
	// asked for one, less 5 seconds, not at the shard's new tip past the
	// records put meanwhile. Without Leases, on a restart with a recovery
	// log (stream.Config.Recovery), a shard the log holds no position of
	// (it delivered nothing) is read from one minute before the previous
	// Run was last seen alive, so records put while the pipeline was down
	// are not skipped.
	Latest InitialPosition = "LATEST"
	// TrimHorizon starts at the oldest record the stream still holds.
	TrimHorizon InitialPosition = "TRIM_HORIZON"
	// AtTimestamp starts at the first record put at or after
	// Config.AtTimestamp.
	AtTimestamp InitialPosition = "AT_TIMESTAMP"
)

// Config configures a Receiver. The zero value of each field is its
// documented default; Stream and App are required.
type Config struct {
	// Stream is the name or the ARN ("arn:aws:kinesis:REGION:ACCOUNT:stream/NAME")
	// of the stream to read. Required. Ranges record it as given.
	Stream string
	// App is the application name: it names this consumer in logs and is
	// the default name of its lease table (Leases) and of its enhanced
	// fan-out consumer (FanOut). Required.
	App string

	// InitialPosition is where a shard present when the receiver starts is
	// read from when no starting sequence number is known for it (see
	// the type). Default Latest, as in the Kinesis Client Library: a new
	// application does not replay the stream's whole retention period. A
	// shard created by a reshard while the receiver runs is always read
	// from TrimHorizon, so none of its records is missed.
	InitialPosition InitialPosition
	// AtTimestamp is the start time for InitialPosition AtTimestamp;
	// required with it, and refused with another InitialPosition, which
	// would not use it.
	AtTimestamp time.Time

	// KeepOutOfRangeRecords delivers every user record of a KPL aggregate,
	// also those whose hash key is outside the shard's hash key range.
	// Default false: they are left out (and counted in
	// Stats.OutOfRangeRecords), because the KPL puts such records again on
	// the shard they belong to when it learns of a reshard, and delivering
	// both copies would duplicate them. Set it when the producer aggregates
	// records of several shards into one Kinesis record and never puts them
	// again (some aggregation libraries other than the KPL do): without it
	// such records are lost, as they are with the KCL. Change it only
	// after a graceful stop (a drain): the blocks a restart recomputes
	// from the recovery log are filtered by the setting in force then,
	// and a block read under the other setting would come back different
	// (G2) or fail its batch.
	KeepOutOfRangeRecords bool
	// Leases, when set, shares the stream's shards among every worker
	// using the same lease table and checkpoints each shard to it on an
	// interval (see leasetable.Config: its TableName defaults to App, its
	// AWS to this Config's AWS). Default: nil, this receiver reads every
	// shard and checkpoints nothing.
	Leases *leasetable.Config
	// FanOut, when set, reads every shard with enhanced fan-out
	// (SubscribeToShard through a registered stream consumer) instead of
	// polling it with GetRecords (see FanOutConfig). Default: nil, polling.
	FanOut *FanOutConfig

	// AWS is the AWS configuration the default client is built from.
	// Default: nil, config.LoadDefaultConfig (environment, shared files,
	// instance role), loaded on first use by Start or Recompute.
	AWS *aws.Config
	// Endpoint overrides the Kinesis endpoint URL of the default client,
	// for example "http://127.0.0.1:4567" for a local server. Default: the
	// AWS configuration's endpoint.
	Endpoint string
	// Client is the Kinesis client used for every call. Default: a
	// kinesis.Client built from AWS and Endpoint, with the SDK's own
	// retries turned off, since the receiver retries, backs off and counts
	// every retry itself. A Client given here is used as it is.
	Client Client

	// RecordsPerRead is the Limit of each GetRecords call, 1 to 10000.
	// Default 10000.
	RecordsPerRead int
	// PollInterval is the wait after a GetRecords call that found the
	// reader at the tip of the shard: no records, or a page neither full
	// nor cut by the response size limit with MillisBehindLatest 0.
	// When the driver gives its batch interval (and the block interval
	// divides it), the next call is timed to end just before the block
	// seal that precedes a batch cut: up to half of this wait sooner, or
	// once, to get in phase, up to this wait later; never closer than
	// MinReadInterval. A batch interval that divides this wait, with
	// MinReadInterval below it, gives one read per PollInterval exactly,
	// each in phase (README, "Low latency"); otherwise reads come at the
	// seals that fit the wait, more often (100ms batches and a 250ms poll:
	// a read every 200ms). Default 500ms: an idle shard then uses 2 of the 5
	// GetRecords calls per second Kinesis allows each shard, shared by
	// every consumer of the stream, and leaves the rest to the others.
	PollInterval time.Duration
	// MinReadInterval is the least time between the starts of two
	// GetRecords calls on one shard. A reader with more records waiting
	// (the last page was full, RecordsPerRead records or as many as the
	// byte budget and rate let it ask for; or cut by the 10 MiB response
	// limit; or MillisBehindLatest > 0) reads again as soon as this much
	// time passed since its last call started, to catch up at the shard's
	// full read rate; otherwise it waits PollInterval, and never less than
	// this. Default 200ms, Kinesis's limit
	// of 5 GetRecords calls per second per shard (a limit shared by every
	// consumer of the stream: raise it to leave room for others, or lower
	// it for a server that has no such limit).
	MinReadInterval time.Duration
	// MaxRecordsPerSecond caps how many Kinesis records a second are read
	// from each shard (a static cap: a reader asks for no more than it
	// has earned, and reads at most every MinReadInterval), for example to
	// leave a shard's read throughput to other consumers. Default 0: no
	// cap. The memory the receiver holds is the pipeline's setting, not
	// this receiver's: stream.Config.MaxBufferedBytes (DESIGN.md, "Memory
	// and flow control").
	MaxRecordsPerSecond float64
	// Backpressure makes the read rate follow the rate at which the
	// pipeline processes this receiver's records, so that batches start on
	// time instead of queueing behind a backlog read into memory; the
	// backlog waits in Kinesis (DESIGN.md, "Memory and flow control"). The
	// rate starts at 100 records/s over all shards and moves to the
	// measured processing rate after the first batch with records. It
	// needs a driver that reports batches (source.BatchObserver; stream's
	// driver does). With MaxRecordsPerSecond too, both limits hold.
	// Default false: read as fast as the memory budget and Kinesis allow.
	Backpressure bool
	// ShardSyncInterval is how often the receiver lists the stream's shards
	// to find shards made by a reshard (without Leases; with them, the
	// lease table's shard sync uses it). Default 10s.
	ShardSyncInterval time.Duration

	// RetryBaseDelay is the first back-off after a throttled call, a server
	// error or a broken connection; each further attempt doubles it, with
	// jitter. Default 100ms.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps the back-off. Default 5s. Shard readers retry such
	// errors for as long as they run: throttling is normal on Kinesis.
	RetryMaxDelay time.Duration
	// AttemptTimeout bounds each attempt of every Kinesis call (GetRecords,
	// GetShardIterator, ListShards, DescribeStreamSummary): an attempt with
	// no answer by then is abandoned and retried like any transient error
	// (counted as "timeout" in Stats.Retries), so a connection that went
	// silent stalls a shard reader for at most this long. Default 10s:
	// a healthy GetRecords answers in tens of milliseconds, and its largest
	// answer, 10 MiB, in under 10s at 10 Mbit/s; raise it for a slower
	// link.
	AttemptTimeout time.Duration
	// RecomputeTimeout bounds one Recompute call, retries included.
	// Default 1m.
	RecomputeTimeout time.Duration
	// MaxAttempts bounds the attempts of each Kinesis call made by
	// Recompute and by Start's check that the stream exists (so an
	// unreachable endpoint fails Start instead of hanging it). Shard readers
	// and shard listing retry for as long as they run. Default 20.
	MaxAttempts int
	// SkipUnavailableRanges makes Recompute leave out the records of a
	// range Kinesis can no longer serve (trimmed past the retention period,
	// or its shard gone), count it in Stats.RangesSkipped, go on with the
	// next range, and return the records of the others with a
	// *source.RangesSkippedError wrapping each skipped range's
	// *RangeUnavailableError. The pipeline then runs the block without
	// those ranges and reports the error to its listeners
	// (stream.Listener.ReceiverError) and its log, at WARN. Default false:
	// Recompute returns the *RangeUnavailableError, and the pipeline stops
	// rather than run a batch with records missing.
	SkipUnavailableRanges bool

	// Logger receives the receiver's logs. Default: the Runtime's logger
	// while Start runs (the driver's, slog.Default() unless set);
	// slog.Default() otherwise.
	Logger *slog.Logger
	// Clock is the time source for polling, pacing, back-off and shard sync.
	// Default: the Runtime's clock while Start runs, clock.Real otherwise.
	Clock clock.Clock

	// Set by this package's tests only:

	// assigner, when set without Leases, decides which shards are read
	// instead of allShards.
	assigner assigner
	// onShardEnd, when set, is called once for each shard a reader read to
	// its end, after every block holding its records was stored: lastSeq is
	// the greatest sequence number stored for the shard, or the greatest of
	// it in a block the driver's recovery log held uncompleted at Start
	// (source.Runtime.Uncompleted) if greater ("" if neither). It is called
	// from the receiver's goroutines, never concurrently for one shard.
	onShardEnd func(ctx context.Context, shardID, lastSeq string)
	// forgetAfter, when not zero, replaces forgetShardAfter.
	forgetAfter time.Duration
}

// withDefaults returns a copy of c with every zero field set to its default.
// Logger and Clock are left nil: they default to the Runtime's.
func (c Config) withDefaults() Config {
	if c.InitialPosition == "" {
		c.InitialPosition = Latest
	}
	if c.RecordsPerRead == 0 {
		c.RecordsPerRead = defaultRecordsPerRead
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.MinReadInterval == 0 {
		c.MinReadInterval = defaultMinReadInterval
	}
	if c.ShardSyncInterval == 0 {
		c.ShardSyncInterval = defaultShardSyncInterval
	}
	if c.RetryBaseDelay == 0 {
		c.RetryBaseDelay = defaultRetryBaseDelay
	}
	if c.RetryMaxDelay == 0 {
		c.RetryMaxDelay = defaultRetryMaxDelay
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = defaultAttemptTimeout
	}
	if c.RecomputeTimeout == 0 {
		c.RecomputeTimeout = defaultRecomputeTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultMaxAttempts
	}
	if c.Leases != nil {
		l := lease.WithDefaults(*c.Leases) // a copy: the caller's is left alone
		c.Leases = &l
	}
	if c.FanOut != nil {
		f := c.FanOut.withDefaults(c.App)
		c.FanOut = &f
	}
	return c
}

// validate reports every problem of c (after withDefaults) together.
func (c Config) validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	if err := validateStream(c.Stream); err != nil {
		problems = append(problems, err)
	}
	if strings.TrimSpace(c.App) == "" {
		add("App %q: must name the application, for example \"wordcount\"", c.App)
	}
	switch c.InitialPosition {
	case Latest, TrimHorizon:
		if !c.AtTimestamp.IsZero() {
			// Most likely InitialPosition was forgotten: reading from
			// elsewhere than the time given would hide it.
			add("AtTimestamp is set with InitialPosition %q, which does not use it: set InitialPosition to AT_TIMESTAMP (kinesis.AtTimestamp) to start at that time, or leave AtTimestamp zero", c.InitialPosition)
		}
	case AtTimestamp:
		if c.AtTimestamp.IsZero() {
			add("AtTimestamp is zero: InitialPosition AT_TIMESTAMP needs the time to start reading at")
		}
	default:
		add("InitialPosition %q: must be LATEST, TRIM_HORIZON or AT_TIMESTAMP", c.InitialPosition)
	}
	if c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
		add("Endpoint %q: must be a URL starting with http:// or https://", c.Endpoint)
	}
	if c.RecordsPerRead < 1 || c.RecordsPerRead > maxRecordsPerRead {
		add("RecordsPerRead %d: must be 1 to %d (0 means %d)", c.RecordsPerRead, maxRecordsPerRead, defaultRecordsPerRead)
	}
	positive := []struct {
		name string
		d    time.Duration
		def  time.Duration
	}{
		{"PollInterval", c.PollInterval, defaultPollInterval},
		{"MinReadInterval", c.MinReadInterval, defaultMinReadInterval},
		{"ShardSyncInterval", c.ShardSyncInterval, defaultShardSyncInterval},
		{"RetryBaseDelay", c.RetryBaseDelay, defaultRetryBaseDelay},
		{"RetryMaxDelay", c.RetryMaxDelay, defaultRetryMaxDelay},
		{"RecomputeTimeout", c.RecomputeTimeout, defaultRecomputeTimeout},
		{"AttemptTimeout", c.AttemptTimeout, defaultAttemptTimeout},
	}
	for _, p := range positive {
		if p.d < 0 {
			add("%s %v: must be > 0 (0 means %v)", p.name, p.d, p.def)
		}
		if p.d > 0 && p.d < time.Millisecond {
			// Seconds meant and nanoseconds written: calls to Kinesis
			// back to back, or bounded too short to ever answer.
			add("%s %v: must be at least 1ms (0 means %v); write a duration in seconds as n * time.Second", p.name, p.d, p.def)
		}
	}
	if c.RetryBaseDelay > 0 && c.RetryMaxDelay > 0 && c.RetryMaxDelay < c.RetryBaseDelay {
		add("RetryMaxDelay %v: must be >= RetryBaseDelay (%v)", c.RetryMaxDelay, c.RetryBaseDelay)
	}
	if c.MaxRecordsPerSecond < 0 || math.IsNaN(c.MaxRecordsPerSecond) || math.IsInf(c.MaxRecordsPerSecond, 0) {
		add("MaxRecordsPerSecond %v: must be > 0 records/s per shard, or 0 for no cap", c.MaxRecordsPerSecond)
	}
	if c.MaxAttempts < 0 {
		add("MaxAttempts %d: must be >= 1 (0 means %d)", c.MaxAttempts, defaultMaxAttempts)
	}
	if c.Leases != nil {
		problems = append(problems, leaseProblems(*c.Leases, c)...)
	}
	if c.FanOut != nil {
		problems = append(problems, c.FanOut.problems(c)...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// validateStream checks a stream name or ARN.
func validateStream(s string) error {
	if s == "" {
		return errors.New("Stream is empty: set it to the stream's name or ARN")
	}
	return awsconf.CheckStream(s)
}

// isARN reports whether s is given as an ARN rather than a name.
func isARN(s string) bool { return strings.HasPrefix(s, "arn:") }

// streamNameOfARN returns the stream name at the end of a Kinesis stream ARN.
func streamNameOfARN(arn string) (string, bool) { return awsconf.StreamNameOfARN(arn) }
