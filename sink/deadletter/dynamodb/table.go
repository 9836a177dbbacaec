package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/letters"
	"github.com/weirstream/weir/internal/letters/lettertable"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/internal/runname"
	sinkddb "github.com/weirstream/weir/sink/dynamodb"
	"github.com/weirstream/weir/stream"
)

// The table's key attributes.
const (
	hashKey  = lettertable.HashKey
	rangeKey = lettertable.RangeKey
)

// maxLetterBytes is the most JSON a letter may take before it is cut (see
// Table): an item is no larger than its letter's JSON, and 1 KiB is left
// for the version attribute and the key.
const maxLetterBytes = sinkddb.MaxItemSize - 1<<10

// Table is a DynamoDB table of dead letters: a stream.DeadLetters. Each
// letter is an item keyed so that no two workers of a fleet, nor two Runs
// without a recovery log, write the same key, and a batch recomputed on
// one worker writes the same keys:
//
//   - a letter read from a source's shard (its Range.First is set: a
//     record isolated by ForEach or a narrow operator, or a record of a
//     ForEachBatch with stream.Origins, which names its origin) by its
//     source record, the same whichever worker reads it: partition key
//     "batch" "<output>:<n>:<stream>/<shard>/<first>" (the output's index,
//     the length n of the stream's name, the stream, the shard and the
//     range's first sequence number) and sort key "index" its Offset;
//   - another letter, and letters of one Quarantine call that name the
//     same source record (the records a FlatMap made of one, refused by a
//     ForEachBatch), by its batch and its record: "batch"
//     "<batch time>-<output>/<fingerprint>" (the batch time in
//     milliseconds; the fingerprint 16 characters of base32 hashing the
//     letter's range, offset, encoding and record, not its Index, error
//     or stack), followed, on a pipeline without a recovery log
//     (stream.HasRecovery), by "/" and a random name of the pipeline's
//     Run, or else, on a pipeline whose source shares its shards with
//     other workers (stream.SharesShards), by "/" and a random name the
//     Table draws in New, and "index" 0, or the number of the batch's
//     earlier letters of an equal record.
//
// Its attributes are the letter's fields, of the names of their JSON
// (time, output, outputName, range as a map of stream, shard, first, last
// and count, offset, record as a binary, encoding, err, panic, stack;
// those empty are left out) but for Index, in "batchIndex", and the sink's
// version attribute. Items of v0.3.0 keyed every letter by its batch,
// without worker, and had no "batchIndex": Letters and weir deadletters
// read them as they are. A letter whose JSON is over about 399 KiB is cut
// first: its stack, then its record, then its panic and error, each to a
// prefix with a marker, a cut record's encoding prefixed "truncated:" so
// that it is not taken for the record (weir deadletters replay refuses
// it); each cut is logged at WARN. Its Range and Offset still name the
// source record.
//
// weir deadletters names a letter of a table "<batch>-<index>", its
// item's key, and replay -table adds to the item of each letter it puts
// back an attribute "replay", its replay state (see DESIGN.md, Failure
// model), which Letters ignores.
//
// Letters are written with the exactly-once sink of package
// sink/dynamodb, versioned by their batch time: a batch recomputed after a
// crash writes the same keys, and its writes are skipped as already
// applied, so the table keeps one item per letter, as the first run wrote
// it (its stack may differ from the recomputed one's); a recomputation
// that quarantines fewer records or others (functions that are not
// deterministic, a flaky downstream) leaves the first run's letters and
// adds those of the records it alone quarantined, under keys of their
// own (at least once: a record that failed only the first time is also
// output). A record that the worker a shard's
// lease moved to reads again, in a range from the same first record (both
// read from the last checkpoint), and quarantines again keeps one item
// too, the letter of the later batch time, which replaces the item and
// any replay state on it; in a range from another record it is a second
// letter. A letter keyed by its batch on a fleet is written again under
// the new random name of a restarted worker, and kept twice (at least
// once; a warning says so once); so is one of several letters of one
// source record that a recomputation quarantines alone, keyed then by its
// source record. A pipeline without a recovery log
// takes its batch times from the wall clock, and a Run whose clock is
// behind an earlier Run's batches gives its batches their times again: a
// letter without a source range keyed by its batch alone would then have
// the key of the earlier Run's letter of that time and index, and be
// skipped as already applied, lost; named by its Run, it is an item of its
// own (such a Run runs no batch of an earlier Run again, so nothing is
// doubled). Quarantine called with the context of no pipeline keys
// letters as on one worker with a log.
//
// A table holds the letters of one pipeline (of all its workers): the keys
// name no pipeline, so another pipeline's letter of the same output index
// would have the key of this one's, if it names the same source record
// (both read one stream) or, at the same batch time, holds an equal record
// without a source range, and its write would be skipped as already
// applied, or replace this one's letter, which is then lost. Give each
// pipeline a table of its own, as a directory of letters is locked by one
// pipeline and a dead-letter stream's Origin names one. A Table is safe
// for concurrent use and holds no resource to close.
type Table struct {
	sink   *sinkddb.Sink[written]
	client sinkddb.Client
	table  string
	logger *slog.Logger
	// worker names this Table in the keys of letters without a source
	// range on a fleet: random, as no name of the worker is given.
	worker    string
	fleetNote sync.Once
}

var _ stream.DeadLetters = (*Table)(nil)

// New returns a Table writing to cfg.Table, configured as the sink of
// package sink/dynamodb is (its client, endpoint, version attribute,
// concurrency, logger and clock), or an error naming what is wrong: a
// VersionAttribute that names an attribute of a letter's item (see Table)
// is refused, wrapping sinkddb.ErrInvalidConfig. The
// table must exist, with the partition key "batch" (string) and the sort
// key "index" (number); New does not create it.
func New(ctx context.Context, cfg sinkddb.Config) (*Table, error) {
	if slices.Contains(lettertable.Attrs(), cfg.VersionAttribute) {
		// The sink would refuse every item holding it, at the first
		// letter, failing its batch; replay would overwrite it.
		return nil, fmt.Errorf("%w: VersionAttribute %q is an attribute of a letter's item (%s): choose another name, or leave it empty for %q",
			sinkddb.ErrInvalidConfig, cfg.VersionAttribute, strings.Join(lettertable.Attrs(), ", "), sinkddb.DefaultVersionAttribute)
	}
	if cfg.Client == nil && cfg.Table != "" {
		if err := awsconf.CheckEndpoint("Endpoint", cfg.Endpoint); err == nil {
			c, err := awsconf.DynamoDB(ctx, cfg.AWS, cfg.Endpoint, "the dead-letter table (set Client or AWS to avoid it)")
			if err != nil {
				return nil, fmt.Errorf("deadletter table: %w", err)
			}
			// The sink is given the client alone, not what built it.
			cfg.Client, cfg.AWS, cfg.Endpoint = c, nil, ""
		}
	}
	// Letters have no origins: their writes are versioned by batch time,
	// on a fleet too. That is safe because no two workers (nor Runs
	// without a log) write the same key: a letter's is its source
	// record's, or its batch's and this worker's or Run's (see Table).
	cfg.AllowBatchTimeVersions = true
	t := &Table{client: cfg.Client, table: cfg.Table, logger: cfg.Logger, worker: origin.RandomWriter()}
	if t.logger == nil {
		t.logger = slog.Default()
	}
	// The key schema is checked on the description the sink's New reads
	// (bounded by its timeout, retried, waited for while CREATING), not
	// by a DescribeTable of its own without those.
	// (A config left without a client here is one the sink refuses.)
	seen := &describeSeen{Client: cfg.Client}
	if o, ok := cfg.Client.(optioned); ok {
		cfg.Client = describeSeenOptions{seen, o} // the sink names its endpoint
	} else if cfg.Client != nil {
		cfg.Client = seen
	}
	s, err := sinkddb.New(ctx, cfg, func(w written) (sinkddb.Write, error) {
		return sinkddb.Write{Item: lettertable.Item(w.l, w.key)}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("deadletter table: %w", err)
	}
	out := seen.last()
	if out == nil {
		return nil, fmt.Errorf("deadletter table %s: the sink read no description of it", cfg.Table)
	}
	if err := checkSchema(out.Table); err != nil {
		return nil, fmt.Errorf("deadletter table: table %s: %w", cfg.Table, err)
	}
	t.sink = s
	return t, nil
}

// describeSeen is a sink client that keeps the last table description it
// read.
type describeSeen struct {
	sinkddb.Client
	mu  sync.Mutex
	out *ddb.DescribeTableOutput
}

// DescribeTable calls the client's, keeping a description read.
func (c *describeSeen) DescribeTable(ctx context.Context, in *ddb.DescribeTableInput, optFns ...func(*ddb.Options)) (*ddb.DescribeTableOutput, error) {
	out, err := c.Client.DescribeTable(ctx, in, optFns...)
	if err == nil {
		c.mu.Lock()
		c.out = out
		c.mu.Unlock()
	}
	return out, err
}

// optioned is a client that shows its options, as *dynamodb.Client does,
// from which the sink reads the endpoint it names in its messages.
type optioned interface{ Options() ddb.Options }

// describeSeenOptions is a describeSeen that shows the options of the
// client it wraps.
type describeSeenOptions struct {
	*describeSeen
	o optioned
}

// Options returns the wrapped client's options.
func (c describeSeenOptions) Options() ddb.Options { return c.o.Options() }

// last returns the last description read.
func (c *describeSeen) last() *ddb.DescribeTableOutput {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out
}

// checkSchema returns an error unless td's key is "batch" (S), "index" (N).
func checkSchema(td *types.TableDescription) error {
	want := map[string]types.ScalarAttributeType{hashKey: types.ScalarAttributeTypeS, rangeKey: types.ScalarAttributeTypeN}
	kinds := map[string]types.KeyType{hashKey: types.KeyTypeHash, rangeKey: types.KeyTypeRange}
	ok := len(td.KeySchema) == 2
	for _, e := range td.KeySchema {
		name := aws.ToString(e.AttributeName)
		if kinds[name] != e.KeyType {
			ok = false
		}
		for _, d := range td.AttributeDefinitions {
			if aws.ToString(d.AttributeName) == name && d.AttributeType != want[name] {
				ok = false
			}
		}
	}
	if !ok {
		return errors.New(`its key must be the partition key "batch" (string) and the sort key "index" (number): create the table so`)
	}
	return nil
}

// Quarantine writes letters, all of one batch and output, each as an item,
// and returns nil once DynamoDB has applied (or skipped as already
// applied) every write. Throttling and errors of unknown outcome are
// retried until ctx is done (see sink/dynamodb's Write).
func (t *Table) Quarantine(ctx context.Context, ls []stream.DeadLetter) error {
	if len(ls) == 0 {
		return nil
	}
	bt, out := ls[0].Time, ls[0].Output
	// The name that keys letters without a source range apart from the
	// same batch time's of another writer: another Run's without a
	// recovery log, another worker's on a fleet (see Table).
	worker, fleet := "", false
	switch run := runname.Of(ctx); {
	case run != "" && !stream.HasRecovery(ctx):
		worker = run
	case stream.SharesShards(ctx):
		worker, fleet = t.worker, true
	}
	// Keyed by the letters as quarantined, not as cut to fit.
	keys := lettertable.Keys(ls, worker)
	fitted := make([]written, len(ls))
	for i, l := range ls {
		if l.Time != bt || l.Output != out {
			return fmt.Errorf("deadletter table %s: letters of batch %v output %d and batch %v output %d in one call: quarantine each batch and output apart", t.table, bt, out, l.Time, l.Output)
		}
		f, cut, err := letters.Fit(l, maxLetterBytes)
		if err != nil {
			return fmt.Errorf("deadletter table %s: %w", t.table, err)
		}
		if cut {
			t.logger.Warn("dead letter cut to fit a DynamoDB item (its Range and Offset say where its record was read)",
				"table", t.table, "batch", bt, "letter", letters.ID(l), "limit", maxLetterBytes)
		}
		fitted[i] = written{f, keys[i]}
		if fleet && !lettertable.BySource(keys[i]) {
			t.fleetNote.Do(func() {
				t.logger.Warn("dead-letter table: letters without a source range (or several of one source record), on a pipeline sharing its shards with other workers, are keyed by a random name of this worker: "+
					"a batch run again after a restart writes them again, under another name (at least once)",
					"table", t.table, "worker", t.worker)
			})
		}
	}
	if err := t.sink.Write(ctx, batch.New(bt, nil, fitted)); err != nil {
		return fmt.Errorf("deadletter table: %w", err)
	}
	return nil
}

// Letters returns every letter of the table, by batch time, then output,
// then Index. It reads the table with Scan (strongly consistent), so the
// Client given to New must have a Scan method, as *dynamodb.Client has.
func (t *Table) Letters(ctx context.Context) ([]stream.DeadLetter, error) {
	sc, ok := t.client.(lettertable.Scanner)
	if !ok {
		return nil, fmt.Errorf("deadletter table %s: the client (%T) has no Scan method: give a *dynamodb.Client", t.table, t.client)
	}
	es, err := lettertable.Scan(ctx, sc, t.table)
	if err != nil {
		return nil, err
	}
	all := make([]stream.DeadLetter, len(es))
	for i, e := range es {
		all[i] = e.Letter
	}
	return all, nil
}

// written is a letter to write and the key of its item (see
// lettertable.Keys).
type written struct {
	l   stream.DeadLetter
	key map[string]types.AttributeValue
}
