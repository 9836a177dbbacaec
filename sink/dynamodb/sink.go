package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/dynamotable"
	"github.com/weirstream/weir/internal/lineage"
	"github.com/weirstream/weir/internal/noretry"
	"github.com/weirstream/weir/internal/outputid"
	"github.com/weirstream/weir/internal/panics"
	"github.com/weirstream/weir/internal/streak"
	"github.com/weirstream/weir/stream"
)

// ErrInvalidConfig is wrapped by the error New returns for a Config it
// refuses, the message naming every bad field and its fix, and by Write's
// for a batch without origins on a pipeline sharing its shards with other
// workers, which the Config does not allow (see Write).
var ErrInvalidConfig = errors.New("dynamodb: invalid config")

// Defaults of the Config fields left zero.
const (
	// DefaultVersionAttribute is Config.VersionAttribute's default.
	DefaultVersionAttribute = "weirVersion"
	// DefaultConcurrency is Config.Concurrency's default: enough requests
	// in flight to keep a table busy from one worker. The SDK's HTTP client
	// keeps at most 10 idle connections per host, so between batches a few
	// connections are closed and dialled again; a client whose transport
	// keeps 16 or more (MaxIdleConnsPerHost) avoids that.
	DefaultConcurrency = 16
)

// attemptTimeout bounds each call of a write, the client's own retries
// included: a write of an item of 400 KB answers well within it on a
// healthy connection, and one with no answer is abandoned and tried again
// rather than holding its batch. It bounds the call, not each attempt
// within it (as an SDK middleware would), because options given per call
// make the SDK redo work on every call: about a tenth of the throughput on
// dynalite (BenchmarkSinkVsLoop).
const attemptTimeout = 5 * time.Second

// retryWait paces the Sink's own retries of a write (after the client's):
// throttling and errors of unknown outcome are retried until DynamoDB
// answers, at most 5 s apart.
var retryWait = backoff.Policy{Base: 50 * time.Millisecond, Max: 5 * time.Second}

// Client is the part of *dynamodb.Client (package
// github.com/aws/aws-sdk-go-v2/service/dynamodb) the Sink uses, so that a
// wrapped client (instrumented, or in tests) can be given.
type Client interface {
	DescribeTable(ctx context.Context, in *ddb.DescribeTableInput, optFns ...func(*ddb.Options)) (*ddb.DescribeTableOutput, error)
	PutItem(ctx context.Context, in *ddb.PutItemInput, optFns ...func(*ddb.Options)) (*ddb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *ddb.UpdateItemInput, optFns ...func(*ddb.Options)) (*ddb.UpdateItemOutput, error)
}

// Config configures a Sink. Only Table is required.
type Config struct {
	// Client is the DynamoDB client, usually a *dynamodb.Client; a client
	// given here is used as it is, so AWS and Endpoint, which it would
	// ignore, must then be left unset. Default: a client built from AWS
	// and Endpoint.
	Client Client
	// AWS is the AWS configuration of the default client. Default: the
	// SDK's default configuration (environment, shared files, instance
	// role).
	AWS *aws.Config
	// Endpoint overrides the DynamoDB endpoint URL of the default client,
	// for example "http://127.0.0.1:4568" for a local server.
	Endpoint string
	// Table is the name of the table written to, which must exist: 3 to
	// 255 of a-z A-Z 0-9 _ . - (DynamoDB's rule, checked by New before any
	// call). Required.
	Table string
	// VersionAttribute is the attribute in which each item keeps the
	// version of the last write applied to it (a number, or a string for a
	// version of origin; see Write). It must not be a key attribute. Every
	// Sink writing the same items needs its own: two Sinks (two outputs,
	// or two pipelines) that write an item in one batch, or from one
	// source record, give their writes the same versions, so with one
	// attribute the second Sink's writes are skipped as already applied,
	// and lost. Within one Run the second output's Write fails instead,
	// naming the item (see Write); two pipelines, or two processes, are
	// not told apart. Default DefaultVersionAttribute ("weirVersion").
	VersionAttribute string
	// Concurrency is the most writes in flight at once. Writes of the
	// same item are never in flight together. Default DefaultConcurrency
	// (16).
	Concurrency int
	// Logger receives warnings, such as writes that keep failing and are
	// being retried. Default slog.Default().
	Logger *slog.Logger
	// Clock times the waits between retries and the timeout of each call
	// (5 s: a call with no answer by then is abandoned and retried).
	// Default clock.Real{}.
	Clock clock.Clock
	// AllowBatchTimeVersions accepts batches without origins on a pipeline
	// whose source shares its shards with other workers (a fleet, see
	// stream.SharesShards), which Write otherwise refuses: their writes are
	// versioned by this worker's batch times, which order nothing across
	// workers, so when an item is written by two workers (a shard's lease
	// moved) the writes of the one whose batch times run behind are skipped
	// as stale, and lost. Set it only when every item is written by one
	// worker for good. Default false.
	AllowBatchTimeVersions bool
}

func (c Config) validate() error {
	var problems []error
	if err := awsconf.CheckEndpoint("Endpoint", c.Endpoint); err != nil {
		problems = append(problems, err)
	}
	if err := awsconf.CheckClient("Client", c.Client != nil, c.AWS != nil, c.Endpoint); err != nil {
		problems = append(problems, err)
	}
	if c.Table == "" {
		problems = append(problems, errors.New("Table empty: set the name of the table to write to"))
	} else if err := dynamotable.CheckName(c.Table); err != nil {
		problems = append(problems, fmt.Errorf("Table: %w", err))
	}
	if c.Concurrency < 0 {
		problems = append(problems, fmt.Errorf("Concurrency %d: must be >= 0 (0 means %d)", c.Concurrency, DefaultConcurrency))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// Sink writes the records of each batch to a DynamoDB table exactly once,
// through the function given to New. Its Write is a stream.ForEachBatch
// function. A Sink is safe for concurrent use, though a pipeline calls it
// one batch at a time; it holds no resource to close.
type Sink[T any] struct {
	client   Client
	table    string
	version  string   // the version attribute
	keyAttrs []string // the table's key attributes, partition key first
	par      int
	logger   *slog.Logger
	clock    clock.Clock
	endpoint string
	timeout  time.Duration // attemptTimeout; tests shorten it
	f        func(T) (Write, error)
	anyTime  bool // Config.AllowBatchTimeVersions

	written, skipped, retried atomic.Int64
	// outage warns of the failed attempts of all the writes since one
	// last got through: the writes in flight go to one endpoint, so an
	// outage fails them all, and one WARN per step speaks for them all.
	outage *streak.Shared

	// items are the items the outputs of a pipeline's Run wrote in its
	// latest batch with a Sink of this table and version attribute (this
	// one, or another of the process: see sharedItems), by their keys'
	// ids: another output's write of one of them is refused (see
	// oneOutput).
	items *outputid.Written[string, string]

	// applied are the writes of origin applied in a batch whose Write
	// failed, skipped by the Write of the batch called next.
	applied applied
}

// sharedItems is, by endpoint, table and version attribute, the record of
// the items written that the Sinks of the process share: two Sinks of one
// table and version attribute given to two outputs collide as one Sink
// given to both does.
var sharedItems sync.Map // sinkKey -> *outputid.Written[string, string]

// sinkKey names the items a Sink writes, by where its client sends
// requests and the table, and the attribute of their versions. Where the
// endpoint is not known (a client of another type), the client itself
// stands for it if it is a pointer (another value, the Sink's own, shared
// with no other).
type sinkKey struct {
	at             any
	table, version string
}

// clientAt returns where client, whose endpoint is endpoint
// (awsconf.DynamoDBEndpoint), sends requests, for a sinkKey.
func clientAt(client Client, endpoint string) any {
	if _, ok := client.(interface{ Options() ddb.Options }); ok {
		return endpoint
	}
	// A pointer only: a comparable type may hold, in an interface field,
	// a value that cannot be hashed, and a key of it would panic.
	if reflect.TypeOf(client).Kind() == reflect.Pointer {
		return client
	}
	return new(byte)
}

// itemsOf returns the record of the items written shared by the Sinks of
// key.
func itemsOf(key sinkKey) *outputid.Written[string, string] {
	w, _ := sharedItems.LoadOrStore(key, &outputid.Written[string, string]{Key: func(id string) string { return id }})
	return w.(*outputid.Written[string, string])
}

// Stats counts what a Sink did since New.
type Stats struct {
	// Written counts the writes DynamoDB applied.
	Written int64
	// Skipped counts the writes DynamoDB did not apply because the item's
	// version was not older than theirs: already applied by an earlier run
	// of their batch (a replay after a crash, or a retry of a write whose
	// answer was lost), or overtaken by a later write of the item (see
	// Write).
	Skipped int64
	// Retried counts the attempts that failed and were tried again
	// (throttling, errors of unknown outcome), beyond the client's own
	// retries.
	Retried int64
}

// Stats returns the counts since New.
func (s *Sink[T]) Stats() Stats {
	return Stats{Written: s.written.Load(), Skipped: s.skipped.Load(), Retried: s.retried.Load()}
}

// New returns a Sink that writes what f makes of each record to
// cfg.Table, or an error wrapping ErrInvalidConfig that names every bad
// field. It reads the table's key attributes (DescribeTable): a table that
// does not exist, that cfg.VersionAttribute is a key of, or whose status no
// wait cures (its KMS key inaccessible, or archived), is an error. A table
// not usable yet (CREATING: created just before, or being restored from a
// backup or to a point in time, which takes 20 minutes to hours) is
// checked again until it is ACTIVE or UPDATING, however long that takes:
// only ctx bounds the wait, which is logged at WARN after 30 s and again
// every 5 minutes, naming the table, its status and the fix; when ctx ends
// first, the error names them too. (Weir's own tables, which it creates,
// fail the start after 5 minutes instead.)
// A DescribeTable with no answer within the call timeout (5 s), or that
// fails for a reason a retry may heal, is tried again after a back-off,
// with a warning at once, up to 5 calls (about half a minute), then New
// returns an error naming the fix.
// f is called from one goroutine, in record order, and must be
// deterministic: a batch run again after a crash must make the same
// writes in the same order (see Write).
func New[T any](ctx context.Context, cfg Config, f func(T) (Write, error)) (*Sink[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("%w: f is nil: give the function that maps a record to its Write", ErrInvalidConfig)
	}
	client := cfg.Client
	if client == nil {
		c, err := awsconf.DynamoDB(ctx, cfg.AWS, cfg.Endpoint, "the DynamoDB sink (set Client or AWS to avoid it)")
		if err != nil {
			return nil, fmt.Errorf("dynamodb: %w", err)
		}
		client = c
	}
	s := &Sink[T]{
		client: client, table: cfg.Table, version: cfg.VersionAttribute, par: cfg.Concurrency,
		logger: cfg.Logger, clock: clock.Or(cfg.Clock), f: f, anyTime: cfg.AllowBatchTimeVersions,
	}
	if s.version == "" {
		s.version = DefaultVersionAttribute
	}
	if s.par == 0 {
		s.par = DefaultConcurrency
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.endpoint = awsconf.DynamoDBEndpoint(ctx, client)
	s.items = itemsOf(sinkKey{clientAt(client, s.endpoint), s.table, s.version})
	s.timeout = attemptTimeout
	s.outage = streak.NewShared(*s.streak("write"))
	out, err := s.usableTable(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range []types.KeyType{types.KeyTypeHash, types.KeyTypeRange} {
		for _, e := range out.Table.KeySchema {
			if e.KeyType == k {
				s.keyAttrs = append(s.keyAttrs, aws.ToString(e.AttributeName))
			}
		}
	}
	for _, a := range s.keyAttrs {
		if a == s.version {
			return nil, fmt.Errorf("%w: VersionAttribute %q is a key attribute of table %s: choose another name", ErrInvalidConfig, a, s.table)
		}
	}
	return s, nil
}

// Write writes the records of batch b, each through the function given to
// New, and returns when every write is applied or skipped as already
// applied, or on the first error, which fails the batch (a pipeline then
// stops, and runs the batch again after a restart). Give it the context a
// pipeline's output passed, or one derived from it: the ancestors of the
// shards, the fleet check and the memory of a failed Write (below) travel
// in it, and a fresh context loses them.
//
// Each write is conditional on its version, which is written to the item
// with it; a write whose item has a version as new or newer is skipped
// (counted in Stats.Skipped). A record with an origin (b.Origins: the
// output was declared with stream.Origins, downstream of a Kinesis source
// through narrow operators) gives its write the version of its position:
// its source shard, sequence number, sub-sequence number and index, the
// same whichever worker of a fleet writes it, so a batch run again, on
// this worker or on the one a shard's lease moved to, or by a zombie,
// changes nothing, and a later record of the shard is applied whatever
// the batch times of the worker writing it. Positions order only the
// records of one shard: a write from another shard than the item's last
// is applied (a key moved to a child shard in a reshard), so an item
// whose records come from several shards (a source not partitioned by the
// item's key) is written at least once across a crash (see below for a
// Write called again without one); but not a write of an ancestor of
// the item's last shard (a parent, a grandparent, and so on, at most 32,
// the nearest first), as the worker that wrote it knew them while it held
// that shard's lease (as its last shard list names them, else, for a
// shard the list does not name, its lease): a child is read only once all its
// parents' records are in completed batches, so such a write (a zombie's,
// or a replay's) was applied already, and is skipped. A record without
// origin gives its write the batch's time and the write's ordinal among
// the batch's writes of the item: with a recovery log, a batch run again after a crash has
// the same time and the same records in the same order (DESIGN.md, G2),
// but batch times order nothing across workers, so on a pipeline whose
// source shares its shards with other workers (stream.SharesShards) such a
// record fails the batch with an error wrapping ErrInvalidConfig that
// names the fixes, unless Config.AllowBatchTimeVersions. An item whose
// version is of the other kind (the pipeline changed) takes the write.
//
// Writes of different items run in parallel, at most Config.Concurrency at
// a time; the writes of one item run one at a time, in record order.
// Throttling, conflicts with another writer of the item (an ongoing
// TransactWriteItems of it, a write in another Region of a global table:
// nothing was applied) and errors that leave a write's outcome unknown (no
// answer, a broken connection, a server error) are retried with back-off
// until DynamoDB applies or skips the write or ctx is done, logged at WARN
// as they go on: at once for a call with no answer, then at 5, 10, 20...
// failed attempts of the Sink's writes in all since one last got through,
// one line for all the writes in flight, naming the cause and the fix, and
// one when a write gets through again. A write refused fails the batch
// with an error naming the table, the item's key and, when it is known,
// the fix (the IAM action to allow, the table to create): a refusal of the
// whole table (missing, access denied, credentials not valid) as no retry
// fixes, so that the pipeline neither tries the output again nor
// quarantines its records, since every record would be refused alike; a
// ValidationException, the record's own, names it (see below). A Write
// the function returns that is not valid (among others, one holding a nil
// value, or a nil pointer of an attribute value type, which the AWS SDK
// cannot send), or a put of an item over MaxItemSize (ErrItemTooLarge),
// is found before anything of the batch is sent and named the same way.
// A panic while a write is sent (in a wrapped Client) fails the batch
// too, with the panic's stack.
//
// The records that cannot be written fail Write with a
// *stream.RecordErrors holding each one's error, by its index in the
// batch: those whose function fails, whose Write is invalid or whose item
// is over MaxItemSize (found before anything is sent, so nothing is), and
// those whose write DynamoDB refuses with a ValidationException (a key
// attribute empty or of the wrong type, a number out of range, an update
// making the item too large). The item's later writes of the batch are
// then not sent (the other items' are), and, of a write DynamoDB refused,
// those of them versioned by batch time are named too, as they cannot be
// applied exactly once without it (a record refused before anything is
// sent is named alone: the later writes take its place in the order). Given to stream.ForEachBatch with stream.Quarantine, those
// records are set aside, each with its error, and Write is called again
// with the others: the writes applied already are skipped as such, and
// the others applied once. For writes with versions of origin the Sink
// remembers which the failed Writes of a batch applied, and skips them in
// the Writes of that batch by the same output of the same Run that follow
// (after stream.RecordErrors, or the output's retry after another error;
// outside a Run, the Writes of the same batch time), until the output
// writes another batch or the Run ends: an item whose records come from
// several shards would take them again by its version alone. A crash or a
// new Run forgets them, and a Write that succeeded adds nothing to them:
// when a ForEachBatch function calls Write and then fails for another
// reason, such an item takes that Write's writes again when the function
// is called again (at least once, as said above).
//
// Outputs of a pipeline may share a Sink for items of their own: a Write
// from an output of an item another output of the same Run wrote in the
// same batch fails, as no retry fixes, since both outputs' writes of the
// item would have the same versions and the second one's would be skipped
// as already applied. The same holds for two Sinks of the process with
// the same table, endpoint and VersionAttribute, given to two outputs.
func (s *Sink[T]) Write(ctx context.Context, b *batch.Batch[T]) error {
	if b.Len() == 0 {
		return nil
	}
	skipped := s.skipped.Load()
	keys, byKey, bad, err := s.plan(ctx, b, !s.anyTime && stream.SharesShards(ctx))
	if err == nil {
		err = s.oneOutput(ctx, b.Time(), keys, byKey)
	}
	if err != nil {
		return fmt.Errorf("dynamodb: table %s, batch %v: %w", s.table, b.Time(), err)
	}
	if len(bad) > 0 {
		return s.refused(b.Time(), bad) // nothing sent
	}
	done := s.applied.begin(ctx, b.Time())
	ok := make([]bool, b.Len()) // by record: its write applied, or found applied
	err = s.send(ctx, keys, byKey, bad, done, ok)
	var failed []string // the writes of origin applied, if Write fails
	if err != nil || len(bad) > 0 {
		for _, id := range keys {
			for _, o := range byKey[id] {
				if ok[o.rec] && o.prefix != "" {
					failed = append(failed, appliedID(id, o.v))
				}
			}
		}
	}
	s.applied.end(done, failed)
	if err != nil {
		return fmt.Errorf("dynamodb: table %s, batch %v: %w", s.table, b.Time(), err)
	}
	if len(bad) > 0 {
		return s.refused(b.Time(), bad)
	}
	if n := s.skipped.Load() - skipped; n > 0 {
		s.logger.Info("dynamodb sink: writes already applied were skipped (applied by a failed Write of the batch just before, a batch run again, an item a later batch wrote, or an ancestor shard's write after its descendant's)",
			"table", s.table, "batch", b.Time(), "skipped", n)
	}
	return nil
}

// send sends the writes of the items of keys (their writes in byKey), in
// parallel, at most s.par at a time, the writes of one item one at a time
// in record order, and returns on the first error. A write DynamoDB
// refuses for its record alone is added to bad, with the item's later
// writes versioned by batch time (see heldBack); the item's later writes
// are then not sent. A write with a version of origin in done is skipped
// as applied; ok is set, by record, for the writes applied or found
// applied (each goroutine sets its own records').
func (s *Sink[T]) send(ctx context.Context, keys []string, byKey map[string][]op, bad map[int]error, done *appliedBatch, ok []bool) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	var badMu sync.Mutex
	for range min(s.par, len(keys)) {
		wg.Go(func() {
			// A panic here (in the Client, a user's wrapper maybe) fails
			// the batch: nothing above this goroutine could recover it.
			err := panics.Call(func() error {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(keys) || ctx.Err() != nil {
						return nil
					}
					id := keys[i]
					ops := byKey[id]
					for j, o := range ops {
						if o.prefix != "" && done.has(id, o.v) {
							s.skipped.Add(1)
							continue
						}
						err := s.apply(ctx, o)
						if err == nil {
							ok[o.rec] = true
						}
						if err != nil && recordRefused(err) {
							// This record's alone: the item's later
							// writes wait for a Write without it, but
							// those versioned by batch time (see
							// heldBack).
							badMu.Lock()
							bad[o.rec] = err
							heldBack(bad, o.rec, ops[j+1:])
							badMu.Unlock()
							break
						}
						if err != nil {
							return err
						}
					}
				}
			})
			if pe, ok := err.(*panics.Error); ok {
				err = fmt.Errorf("%w, in a write:\n%s", pe, pe.Stack)
			}
			if err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// refused returns the error of a Write of the batch at time t whose
// records bad (by index, with their errors) cannot be written.
func (s *Sink[T]) refused(t batch.Time, bad map[int]error) error {
	for i, err := range bad {
		bad[i] = fmt.Errorf("dynamodb: table %s, batch %v: record %d: %w", s.table, t, i, err)
	}
	return &stream.RecordErrors{Errs: bad}
}

// heldBack adds to bad the writes of later, the writes of an item after
// that of record rec, which DynamoDB refused, that are versioned by batch
// time. Their version is their ordinal among the item's writes in the
// batch: written in a Write without rec, each would take the version of
// the write before it, and a rerun of the whole batch (a crash before its
// checkpoint) would skip rec's write as applied (its version is the item's
// now) and apply the last of them again. Each is named with an error of
// its own, so that the Write without them sends none of the item's writes
// after those applied, and a rerun refuses rec's again.
func heldBack(bad map[int]error, rec int, later []op) {
	for _, o := range later {
		if o.prefix == "" {
			bad[o.rec] = fmt.Errorf("not written: DynamoDB refused record %d, an earlier write of its item in the batch, and this write, versioned by batch time, would take that write's version in a Write without it", rec)
		}
	}
}

// recordRefused reports whether err, the error of a write, is DynamoDB
// refusing that write alone (a ValidationException: a key of the wrong
// type or empty, a number out of range, an update making the item too
// large), which no retry and no other write changes.
func recordRefused(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException"
}

// oneOutput returns an error, marked as no retry fixes (internal/noretry),
// if ctx is that of an output of a pipeline's Run and another output of
// that Run wrote an item of keys (the ids of the items of batch t, their
// writes in byKey) in batch t: both outputs' writes of the item would have the same versions (the
// batch time and ordinal, or the same origin), and the second one's be
// skipped as already applied. Outputs writing items of their own share
// the Sink: their versions never meet. It records keys as the output's.
func (s *Sink[T]) oneOutput(ctx context.Context, t batch.Time, keys []string, byKey map[string][]op) error {
	if first, out, id, clash := s.items.Claim(ctx, int64(t), keys); clash {
		return noretry.Mark(fmt.Errorf("output %d of the pipeline writes the item of key %s of table %s, and so does output %d in the same batch, "+
			"with this Sink or another of the same table and VersionAttribute (%q): "+
			"both outputs' writes of the item would have the same versions, and the second one's be skipped as already applied; "+
			"let one output write each item, or give each output a Sink of its own with a VersionAttribute of its own",
			first, formatKey(byKey[id][0].key, s.keyAttrs), s.table, out, s.version))
	}
	return nil
}

// plan maps b's records to writes and groups them by item: the keys' ids
// in order of first appearance, and each item's writes in record order,
// each with its version (see versionOf) and, for a version of origin, the
// lineage of its shard, whose ancestors ctx gives (see lineageOf); and, by
// index, the errors of the records that make no valid write (the function
// failed, an invalid Write, an item too large), which are left out, their
// items' later writes taking their ordinals. fleet refuses a record
// without origin (see Write).
func (s *Sink[T]) plan(ctx context.Context, b *batch.Batch[T], fleet bool) ([]string, map[string][]op, map[int]error, error) {
	var keys []string
	byKey := make(map[string][]op)
	bad := make(map[int]error)
	origins := b.Origins()
	var last map[[2]string]string                // an item's (id) last version of origin of a shard (prefix)
	var lineages map[string]string               // a shard prefix's lineage
	var ancestors map[string]map[string][]string // a stream's shards' ancestors, looked up once
	i := -1
	for v := range b.All() {
		i++
		w, err := s.f(v)
		if err != nil {
			bad[i] = err
			continue
		}
		key, err := check(w, s.keyAttrs, s.version)
		if err != nil {
			bad[i] = fmt.Errorf("invalid Write: %w", err)
			continue
		}
		id, err := keyID(key, s.keyAttrs)
		if err != nil {
			bad[i] = fmt.Errorf("invalid Write: key %s: %w", formatKey(key, s.keyAttrs), err)
			continue
		}
		o := op{w: w, key: key, rec: i}
		ops := byKey[id]
		if len(ops) == maxOrdinal {
			return nil, nil, nil, fmt.Errorf("key %s: more than %d writes of one item in a batch: shorten the batch interval or combine them", formatKey(key, s.keyAttrs), maxOrdinal)
		}
		var from batch.Origin
		if origins != nil {
			from = origins[i]
		}
		if err := versionOf(&o, from, b.Time(), len(ops), fleet); err != nil {
			return nil, nil, nil, fmt.Errorf("record %d, key %s: %w", i, formatKey(key, s.keyAttrs), err)
		}
		if o.prefix != "" {
			// The writes of an item go out in record order: a version of
			// a shard that does not grow would be skipped.
			if last == nil {
				last = make(map[[2]string]string)
			}
			k := [2]string{id, o.prefix}
			if prev, ok := last[k]; ok && prev >= o.v {
				return nil, nil, nil, fmt.Errorf("record %d, key %s: origin %s/%s %s (sub-sequence %d, index %d) comes after a later record of its shard in the batch",
					i, formatKey(key, s.keyAttrs), from.Stream, from.Shard, from.Seq, from.SubSeq, from.Index)
			}
			last[k] = o.v
			l, ok := lineages[o.prefix]
			if !ok {
				as, ok := ancestors[from.Stream]
				if !ok {
					as = lineage.Ancestors(ctx, from.Stream)
					if ancestors == nil {
						ancestors = make(map[string]map[string][]string)
					}
					ancestors[from.Stream] = as
				}
				l = lineageOf(from.Stream, as[from.Shard])
				if lineages == nil {
					lineages = make(map[string]string)
				}
				lineages[o.prefix] = l
			}
			o.lineage = l
		}
		if o.w.Item != nil {
			// Checked before any write is sent, as the Writes are.
			if err := s.checkSize(o); err != nil {
				bad[i] = err
				continue
			}
		}
		if len(ops) == 0 {
			keys = append(keys, id)
		}
		byKey[id] = append(ops, o)
	}
	return keys, byKey, bad, nil
}

// checkSize returns an error wrapping ErrItemTooLarge if the item o puts,
// its version attribute included (check refused an Item that has it), is
// over MaxItemSize. The version's value is request's: the string
// o.v+o.lineage for a version of origin, else the number o.v.
func (s *Sink[T]) checkSize(o op) error {
	size := itemSize(o.w.Item) + len(s.version)
	if o.prefix != "" {
		size += len(o.v) + len(o.lineage)
	} else {
		size += numberSize(o.v)
	}
	if size > MaxItemSize {
		return fmt.Errorf("%w: key %s: %d bytes (attribute names and version included), DynamoDB stores at most %d",
			ErrItemTooLarge, formatKey(o.key, s.keyAttrs), size, MaxItemSize)
	}
	return nil
}

// versionOf sets the version of o, the write of ordinal n among the
// writes of its item in the batch at time t, made of a record of origin
// from: the origin's position if it has one (Seq set), else t and n,
// which fleet refuses, with an error marked as no retry fixes
// (internal/noretry): the same at every try, it fails Run at once.
func versionOf(o *op, from batch.Origin, t batch.Time, n int, fleet bool) error {
	var err error
	switch {
	case from.Seq != "":
		o.prefix, o.v, err = originVersion(from)
	case fleet:
		err = noretry.Mark(fmt.Errorf("%w: the record has no origin, and the pipeline's source shares its shards with other workers (leases): "+
			"versioned by this worker's batch times, its write would be skipped as stale by an item another worker wrote under later batch times, and lost; "+
			"give the output the option stream.Origins(), with only narrow operators (Map, Filter, FlatMap) between a Kinesis source partitioned by the item's key and the sink, "+
			"so that versions are the records' positions in their shards; or run one worker; or accept versions by batch time with Config.AllowBatchTimeVersions",
			ErrInvalidConfig))
	case t < 0:
		err = errors.New("a batch time before 1970 has no version")
	default:
		o.v = version(int64(t), n)
	}
	return err
}

// tableWait paces the checks of a table not usable yet (CREATING).
var tableWait = backoff.Policy{Base: 50 * time.Millisecond, Max: 2 * time.Second}

// usableTable returns the table's description once it serves reads and
// writes (ACTIVE or UPDATING), checking again after a back-off while it is
// not yet usable, for as long as ctx allows (the table is the user's, and
// may be being restored: see dynamotable.Wait.Unbounded), warning as
// dynamotable.Wait does; a status no wait cures is an error at once. Each
// check is a describe.
func (s *Sink[T]) usableTable(ctx context.Context) (*ddb.DescribeTableOutput, error) {
	tw := dynamotable.Wait{Table: s.table, Prefix: "dynamodb sink", Logger: s.logger, Unbounded: true}
	var wait *backoff.Backoff
	for {
		out, err := s.describe(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: describe table %s (the sink's Table, which must exist): %w", s.table, err)
		}
		if out.Table == nil {
			return nil, fmt.Errorf("dynamodb: describe table %s (the sink's Table): %w", s.table, dynamotable.ErrNoDescription)
		}
		usable, err := tw.Check(out.Table.TableStatus, s.clock.Now())
		switch {
		case err != nil:
			return nil, fmt.Errorf("dynamodb: the sink's Table: %w", err)
		case usable:
			return out, nil
		}
		if wait == nil {
			wait = tableWait.Start()
		}
		if err := wait.Wait(ctx, s.clock); err != nil {
			return nil, fmt.Errorf("dynamodb: waiting for the sink's Table %s (status %s) to be ACTIVE or UPDATING: %w (fix: %s)",
				s.table, out.Table.TableStatus, err, dynamotable.Fix(out.Table.TableStatus))
		}
	}
}

// describeAttempts is how many DescribeTable calls in a row New lets fail
// for a reason a retry may heal (no answer within the call timeout, a cut
// connection, throttling, a server error) before it gives up: with the
// call timeout and the back-off, about half a minute of a DynamoDB that
// does not answer.
const describeAttempts = 5

// describe reads the table's description, each call bounded by the call
// timeout and tried again with back-off after a failure a retry may heal,
// warning at once for a DynamoDB that does not answer, up to
// describeAttempts calls; an error a retry cannot heal is returned at once.
// Either error names the fix when it is known.
func (s *Sink[T]) describe(ctx context.Context) (*ddb.DescribeTableOutput, error) {
	var wait *backoff.Backoff
	var st *streak.Streak
	for n := 1; ; n++ {
		actx, cancel := attempt.WithTimeout(ctx, s.clock, s.timeout)
		out, err := s.client.DescribeTable(actx, &ddb.DescribeTableInput{TableName: aws.String(s.table)})
		err = attempt.Error(actx, err, s.timeout)
		cancel()
		switch {
		case err == nil:
			if st != nil {
				st.Ended(n)
			}
			return out, nil
		case ctx.Err() != nil:
			return nil, err
		case awserr.Refused(err):
			return nil, s.withFix("DescribeTable", err)
		}
		if wait == nil {
			wait, st = retryWait.Start(), s.streak("DescribeTable")
		}
		c := cause(err)
		if n == describeAttempts {
			return nil, fmt.Errorf("%d calls in a row failed: %w (fix: %s)", n, err, st.FixFor(c))
		}
		st.Failed(n, c, c != "throttled" && c != "retries timed out", err) // DynamoDB answered those
		if werr := wait.Wait(ctx, s.clock); werr != nil {
			return nil, errors.Join(werr, err)
		}
	}
}

// maxOrdinal is the most writes of one item a batch may have.
const maxOrdinal = 1_000_000_000

// apply sends one write, retrying it until DynamoDB answers.
func (s *Sink[T]) apply(ctx context.Context, o op) error {
	send, err := s.request(o)
	if err != nil {
		return err
	}
	var wait *backoff.Backoff
	for {
		actx, cancel := attempt.WithTimeout(ctx, s.clock, s.timeout)
		err := attempt.Error(actx, send(actx), s.timeout)
		cancel()
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			s.written.Add(1)
		case errors.As(err, &ccf):
			s.skipped.Add(1)
			err = nil
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case awserr.Refused(err):
			err = fmt.Errorf("key %s: %w", formatKey(o.key, s.keyAttrs), s.withFix(o.op(), err))
			if awserr.TargetRefused(err) {
				// The table's refusal, not the record's: every write
				// is refused alike (see internal/noretry).
				err = noretry.Mark(err)
			}
			return err
		default:
			if wait == nil {
				wait = retryWait.Start()
			}
			s.retried.Add(1)
			// A silent call holds its item the whole timeout: warn at once
			// (once for the writes in flight, see outage).
			c := cause(err)
			s.outage.Failed(c, c == "timeout", err)
			if werr := wait.Wait(ctx, s.clock); werr != nil {
				return context.Cause(ctx)
			}
			continue
		}
		s.outage.Succeeded()
		return err
	}
}

// request returns the call that sends o with its version, or an error for
// a put of an item too large.
func (s *Sink[T]) request(o op) (func(context.Context) error, error) {
	names := map[string]string{versionName: s.version}
	cond, values := timeCondition, map[string]types.AttributeValue{versionValue: &types.AttributeValueMemberN{Value: o.v}}
	if o.prefix != "" {
		cond, values = originCondition, map[string]types.AttributeValue{
			versionValue:  &types.AttributeValueMemberS{Value: o.v + o.lineage},
			positionValue: &types.AttributeValueMemberS{Value: o.v},
			shardValue:    &types.AttributeValueMemberS{Value: o.prefix},
			fenceValue:    &types.AttributeValueMemberS{Value: lineageMark + o.prefix},
		}
	}
	v := values[versionValue]
	if o.w.Item != nil {
		if o.prefix != "" {
			delete(values, versionValue) // the condition compares positionValue
		}
		item := make(map[string]types.AttributeValue, len(o.w.Item)+1)
		for a, x := range o.w.Item {
			item[a] = x
		}
		item[s.version] = v // its size checked by plan (checkSize)
		in := &ddb.PutItemInput{
			TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		}
		return func(ctx context.Context) error { _, err := s.client.PutItem(ctx, in); return err }, nil
	}
	for k, x := range o.w.Values {
		values[k] = x
	}
	for k, x := range o.w.Names {
		names[k] = x
	}
	in := &ddb.UpdateItemInput{
		TableName: aws.String(s.table), Key: o.key, UpdateExpression: aws.String(withVersion(o.w.Update)),
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	}
	return func(ctx context.Context) error { _, err := s.client.UpdateItem(ctx, in); return err }, nil
}

// streak returns the warner of a call (a write, DescribeTable) that keeps
// failing.
func (s *Sink[T]) streak(op string) *streak.Streak {
	return &streak.Streak{
		Logger: s.logger, Clock: s.clock, Prefix: "dynamodb sink", Service: "DynamoDB",
		Op: op, Attr: slog.String("table", s.table), Endpoint: s.endpoint,
		Fix: func(cause, endpoint string) string {
			switch cause {
			case "throttled":
				return "the table's capacity is too small for the writes: raise it (or use on-demand), or lower Concurrency"
			case "retries timed out":
				return "DynamoDB answered with errors its client retries, and the client's retries outlasted the call timeout (" + s.timeout.String() + "): " +
					"throttling most likely, the table's capacity too small for the writes: raise it (or use on-demand), or lower Concurrency; or server errors"
			case "conflict":
				return "another writer holds the item (a TransactWriteItems of it, or a write in another Region of a global table): " +
					"retried until it lets go; if it never does, find that writer"
			}
			return "DynamoDB at " + endpoint + " does not answer: check the sink's Endpoint, the region (AWS_REGION), proxies and the network"
		},
	}
}

// cause names the cause of a failed attempt for the logs. A call that
// timed out while the client waited to retry (the SDK's retryer then
// returns an *aws.RequestCanceledError, without the error it was retrying)
// got answers: errors the client retries, throttling most often, whose
// back-off outlasted the call timeout.
func cause(err error) string {
	var retrying *aws.RequestCanceledError
	switch {
	case awserr.DynamoDBThrottled(err):
		return "throttled"
	case awserr.DynamoDBConflict(err):
		return "conflict"
	case errors.Is(err, attempt.ErrTimeout) && errors.As(err, &retrying):
		return "retries timed out"
	case errors.Is(err, attempt.ErrTimeout):
		return "timeout"
	}
	return "no definite answer"
}
