package repartition

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/noretry"
	sink "github.com/weirstream/weir/sink/kinesis"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/stream"
)

// ErrInvalidConfig is wrapped by the error ByKey returns for a Config it
// refuses; the message names every bad field and its fix.
var ErrInvalidConfig = errors.New("repartition: invalid config")

// maxShards is the most shards ByKey creates a stream with; more is a
// mistake (Kinesis's default account limit is far lower) or a reshard.
const maxShards = 10000

// writerPrefix is the Origin of the sink writing the stream: the writer of
// its version 1 tags, with the worker's name (Config.Writer) after a "/"
// when it has one.
const writerPrefix = "repartition"

// maxWriter is the longest Config.Writer: the writer of a tag holds 128
// bytes.
const maxWriter = 128 - len(writerPrefix) - 1

// activeWait bounds the wait for a stream ByKey created to become ACTIVE.
const activeWait = 5 * time.Minute

// streamName is Kinesis's pattern for a stream name.
var streamName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// Config configures ByKey. Stream is required; every other field's zero
// value is its documented default.
type Config[K comparable, V any] struct {
	// Stream is the name of the intermediate Kinesis stream: 1 to 128 of
	// a-z A-Z 0-9 _ . -. It must be this pipeline's alone (no other
	// program writes or reads it), and one ByKey's: a second ByKey of the
	// pipeline to it is refused, and so is, at the first write (Run then
	// fails at once, not tried again, wrapping ErrInvalidConfig), a stream
	// a Kinesis source of the pipeline reads. Required.
	Stream string
	// Shards, when > 0, creates the stream with this many shards if it
	// does not exist (ByKey waits until it is ACTIVE, or UPDATING: being
	// resharded, and fails at once on one being deleted); an existing
	// stream is used as it is, whatever its shard count. Default 0: the
	// stream must exist (the receiver's Start fails otherwise).
	Shards int
	// Writer names this worker in the origin tags of records that have no
	// origins (a keyed operator before ByKey, see stream.Origins), whose
	// writer is "repartition/" + Writer (sink/kinesis's Config.Worker): it
	// must differ between the workers of a fleet, or a reader may drop a
	// record of one worker as a copy of another's, and stay the same
	// across the worker's restarts, so that the copies a batch run again
	// after a restart writes are dropped. Records with origins (only
	// narrow operators between a Kinesis source and ByKey) are tagged with
	// their origin, the same whichever worker writes them, and ignore it.
	// At most 116 bytes. Default "": the writer is "repartition" on one
	// worker, and on a fleet (a source sharing its shards, such as one
	// with Leases) "repartition/" and a random name of each process, so no
	// record is lost, but the copies of a batch run again after a restart
	// are kept. A pipeline without a recovery log ignores it: the writer
	// is "repartition/" and a random name of the Run, whose batch times
	// may repeat an earlier Run's (see sink/kinesis's Config.Origin).
	Writer string

	// Leases, when set, shares the intermediate stream's shards among the
	// workers of a fleet and checkpoints them, as kinesis.Config.Leases
	// does; give the same Config as the pipeline's source. The lease table
	// is named after the stream (Stream + ".leases"), whatever TableName
	// says, since a table holds the leases of one stream; a StateDir gets
	// a sub-directory of the same name. Default nil: this worker reads every
	// shard and checkpoints nothing, so each start reads the stream from
	// its trim horizon again: for tests, or a stream made for one run. Nil
	// on a pipeline whose source shares its shards (a Kinesis source with
	// Leases) is refused: the first write fails Run at once (not tried
	// again) with an error wrapping ErrInvalidConfig, since every worker
	// would read every record.
	Leases *leasetable.Config
	// AWS is the AWS configuration the default clients are built from.
	// Default: nil, config.LoadDefaultConfig (environment, shared files,
	// instance role).
	AWS *aws.Config
	// Endpoint overrides the Kinesis endpoint URL of the default clients,
	// for example "http://127.0.0.1:4567" for a local server.
	Endpoint string
	// Client is the Kinesis client used to create, write and read the
	// stream. Default: clients built from AWS and Endpoint (the reader's
	// without the SDK's retries, as kinesis.Config.Client).
	Client *awskinesis.Client

	// KeyCodec and ValueCodec encode each record's key and value into its
	// Kinesis record, and decode them when it is read. The encoded key is
	// also the partition key (see ByKey), so a key must decode to one that
	// encodes the same: a key that does not (a string that is not valid
	// UTF-8, which stream.JSONCodec reads back with U+FFFD) is one ByKey
	// cannot carry (see DeadLetters). Default stream.JSONCodec.
	KeyCodec   stream.Codec[K]
	ValueCodec stream.Codec[V]

	// DeadLetters, when set, sets aside the records ByKey cannot carry,
	// as stream.Quarantine does for an output, and the pipeline goes on:
	// a record whose key KeyCodec or whose value ValueCodec refuses to
	// encode (returns an error, or panics), whose key does not encode
	// the same once decoded, or whose Kinesis record would be too large
	// (see ByKey), is not written, and a record
	// read back from the stream that does not decode (written by another
	// program, or with other codecs; a codec that panics decoding it) is
	// not passed on; each is sent to DeadLetters, with the error naming
	// it (its key; its shard and sequence number), before the batch
	// completes. It adds two outputs to the pipeline, named "repartition
	// <Stream> unencodable" and "repartition <Stream> undecodable", which
	// send them (stream.Quarantine, stream.Retry(0)): a pipeline started
	// with a recovery log without DeadLetters has another shape, so setting
	// it later needs a new log (recovery.ErrShapeChanged). Default nil:
	// such a record stops Run, with an error naming it and this field.
	DeadLetters stream.DeadLetters
}

// validate returns an error wrapping ErrInvalidConfig that names every bad
// field of c, or nil.
func (c *Config[K, V]) validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if !streamName.MatchString(c.Stream) {
		add("Stream %q: must be 1 to 128 of a-z A-Z 0-9 _ . -", c.Stream)
	}
	if c.Shards < 0 || c.Shards > maxShards {
		add("Shards %d: must be 0 (the stream must exist) to %d", c.Shards, maxShards)
	}
	if len(c.Writer) > maxWriter {
		add("Writer: %d bytes: must be at most %d", len(c.Writer), maxWriter)
	}
	if c.Client != nil && (c.AWS != nil || c.Endpoint != "") {
		add("Client is set with AWS or Endpoint: set either Client or AWS/Endpoint")
	}
	if v := reflect.ValueOf(c.DeadLetters); v.Kind() == reflect.Pointer && v.IsNil() {
		// It would panic when a record fails, stopping Run then.
		add("DeadLetters is a nil %T: pass the DeadLetters to send the records ByKey cannot carry to, or leave it nil", c.DeadLetters)
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
}

// ByKey writes the records of s to the Kinesis stream cfg.Stream, each
// with its encoded key as partition key, and returns the stream of the
// records read back from it by a Kinesis receiver added to s's Pipeline:
// after it, every record of a key is read from one shard, so a stateful
// operator keyed by the same key runs on a fleet sharing the stream's
// shards by leases (the receiver is declared stream.PartitionedByKey).
// Kinesis picks a record's shard by the MD5 hash of its partition key; an
// encoded key that is not 1 to 256 characters of valid UTF-8, the partition
// keys Kinesis takes, is replaced by its SHA-256 in hexadecimal (with a
// prefix), the same for every record of the key. A record's partition key
// and data (the encoded key's length, the key and the value) must be at
// most 1 MiB (1048576 bytes, Kinesis's maximum record size) less 677
// bytes, the most the origin tag before the data takes; a larger one is a
// record ByKey cannot carry.
//
// Each batch of s is written by an output of the pipeline (named
// "repartition <Stream>"), the records of one key packed into KPL
// aggregates (kinesis.Config.Aggregate), with origin tags (see
// Config.Writer and DESIGN.md, "Repartition"): a batch that runs again after a crash
// writes its records again, and the reading side drops the copies. The
// records come back in later batches, each key's in the order written.
// A record ByKey cannot carry (its key or value the codecs refuse, its
// record too large, or a record read back that does not decode) stops
// Run, with an error naming it, unless Config.DeadLetters is set: then it
// is quarantined and the pipeline goes on.
// ctx bounds the creation of the stream (Config.Shards); ByKey makes no
// other call. A bad Config returns an error wrapping ErrInvalidConfig.
func ByKey[K comparable, V any](ctx context.Context, s *stream.Stream[stream.Pair[K, V]], cfg Config[K, V]) (*stream.Stream[stream.Pair[K, V]], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	name := "repartition " + cfg.Stream
	// Each ByKey adds a reader of its stream, which reads every record of
	// it: two ByKeys to one stream would each pass on the other's records.
	// The sources s derives from are all declared by now: which are
	// Kinesis receivers, whose streams the write output checks.
	var kinesisSources []bool
	for _, src := range s.Pipeline().Shape().Sources {
		if src.Name == name {
			return nil, fmt.Errorf("%w: Stream %q: the pipeline already has a source named %q, the reader of a ByKey to that stream, "+
				"and each ByKey's reader would pass on the records of both: give each ByKey a stream of its own, "+
				"or join the keyed streams (stream.Union) and repartition them with one ByKey", ErrInvalidConfig, cfg.Stream, name)
		}
		kinesisSources = append(kinesisSources, src.Kind == "kinesis")
	}
	c := codec[K, V]{key: cfg.KeyCodec, value: cfg.ValueCodec}
	if c.key == nil {
		c.key = stream.JSONCodec[K]()
	}
	if c.value == nil {
		c.value = stream.JSONCodec[V]()
	}
	kc := cfg.Client
	if kc == nil {
		awsCfg, err := awsconf.Load(ctx, cfg.AWS, "Kinesis (set Config.AWS or Config.Client to avoid it)")
		if err != nil {
			return nil, fmt.Errorf("repartition: %w", err)
		}
		cfg.AWS = &awsCfg // the reader's too: loaded once
		kc = awskinesis.NewFromConfig(awsCfg, func(o *awskinesis.Options) {
			if cfg.Endpoint != "" {
				o.BaseEndpoint = aws.String(cfg.Endpoint)
			}
		})
	}
	// The writer and the reader are made before the stream or the pipeline
	// is touched: the reader's New checks Leases, so a bad one is refused
	// with nothing created and nothing added.
	w, err := sink.New(sink.Config[encoded]{Client: kc, Stream: cfg.Stream, Origin: writerPrefix, Worker: cfg.Writer, Aggregate: true,
		MaxRecordBytes: maxRecordBytes, Record: func(e encoded) (string, []byte) { return e.partitionKey, e.data }})
	if err != nil {
		return nil, fmt.Errorf("repartition: %w", err)
	}
	recv, err := newReceiver(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Shards > 0 {
		if err := create(ctx, kc, cfg.Stream, cfg.Shards); err != nil {
			return nil, err
		}
	}

	quarantine := cfg.DeadLetters != nil
	stream.ForEachBatch(stream.Map(s, c.encode), func(ctx context.Context, b *batch.Batch[encoded]) error {
		// These refusals are the same at every try: they fail Run at
		// once, not after the output's retries.
		if err := readsItself(b, cfg.Stream, kinesisSources); err != nil {
			return noretry.Mark(err)
		}
		if cfg.Leases == nil && stream.SharesShards(ctx) {
			return noretry.Mark(fmt.Errorf("%w: Leases nil on a pipeline whose source shares its shards with other workers (leases): "+
				"every worker would read every shard of %s and process each record once per worker; "+
				"set Leases to the source's lease configuration", ErrInvalidConfig, cfg.Stream))
		}
		b, err := writable(b, quarantine)
		if err != nil {
			return err
		}
		return refused(b, w.Write(ctx, b), quarantine)
	}, stream.Named(name), stream.Origins())

	raw := stream.From(s.Pipeline(), recv, stream.PartitionedByKey(), stream.Named(name))
	// The reading side's deduplication: sink/kinesis's Deduplicate,
	// whose filters are state, exact across a crash (DESIGN.md).
	// Every record of a key is read from the shard its partition key
	// places it in: the stateful operators after ByKey keep their state
	// per shard, moving with the shard's lease (stream.PartitionedBy).
	deduped := sink.Deduplicate(raw)
	decode := func(_ context.Context, b *batch.Batch[source.Record]) (*batch.Batch[stream.Pair[K, V]], error) {
		return c.decodeBatch(cfg.Stream, b, quarantine)
	}
	out := stream.PartitionedBy(stream.Transform(deduped, decode), c.partitionKeyOf)
	if quarantine {
		// The records the write output leaves out and those the
		// decoding leaves out, each quarantined alone by an output of
		// its own (the letters of a batch and output are one call).
		opts := func(what string) []stream.Option {
			return []stream.Option{stream.Named(name + " " + what), stream.Retry(0), stream.Quarantine(cfg.DeadLetters)}
		}
		stream.ForEach(s, func(_ context.Context, p stream.Pair[K, V]) error { return c.encode(p).err }, opts("unencodable")...)
		stream.ForEach(deduped, func(_ context.Context, r source.Record) error {
			if _, err := c.decode(r.Data); err != nil {
				return readError(cfg.Stream, r, err)
			}
			return nil
		}, opts("undecodable")...)
	}
	return out, nil
}

// readsItself returns an error wrapping ErrInvalidConfig if a record of b
// was read from the stream name, which ByKey writes, by a Kinesis source
// (kinesis[i] for source i): the pipeline would read what it writes again,
// without end, and its reader would meet the source's own records.
func readsItself(b *batch.Batch[encoded], name string, kinesis []bool) error {
	for _, blk := range b.Blocks() {
		src := blk.ID.Source
		if src < 0 || src >= len(kinesis) || !kinesis[src] {
			continue
		}
		for _, r := range blk.Ranges {
			if r.Stream == name || strings.HasSuffix(r.Stream, ":stream/"+name) {
				return fmt.Errorf("%w: Stream %q: source %d of the pipeline reads it (shard %s), so ByKey would write the records back into "+
					"its own input, which reads them again, without end: give ByKey an intermediate stream of its own (nothing was written)",
					ErrInvalidConfig, name, src, r.Shard)
			}
		}
	}
	return nil
}

// writable returns the records of b that were encoded, with their
// origins. A record that could not be encoded fails it, unless quarantine
// is set: an output of its own quarantines it (see ByKey). The failure is
// marked as no retry fixes (internal/noretry): it stops Run at once, with
// its own fix, Config.DeadLetters, not the driver's advice of
// stream.Quarantine, which ByKey's output cannot be given.
func writable(b *batch.Batch[encoded], quarantine bool) (*batch.Batch[encoded], error) {
	if quarantine {
		return b.Keep(func(_ int, e encoded) bool { return e.err == nil }), nil
	}
	i := 0
	for e := range b.All() {
		if e.err != nil {
			// Marked: the codecs are deterministic, so no retry writes it,
			// and the driver must not advise stream.Quarantine.
			return nil, noretry.Mark(fmt.Errorf("repartition: ByKey cannot write %s: %w: %s", recordAt(b.Origins(), i), e.err, deadLettersFix))
		}
		i++
	}
	return b, nil
}

// deadLettersFix ends the error of a record ByKey cannot write, without
// Config.DeadLetters.
const deadLettersFix = "set repartition.Config.DeadLetters to send the records ByKey cannot write to dead letters and go on " +
	"(stream.Quarantine cannot be given to ByKey's output), or fix the codec or the record"

// recordAt names record i of a batch whose origins are origins (nil: none)
// for an error: its source record when it has one.
func recordAt(origins []batch.Origin, i int) string {
	if origins == nil || origins[i].Seq == "" {
		return "a record"
	}
	o := origins[i]
	return fmt.Sprintf("the record of shard %s of stream %s, sequence number %s, sub-sequence %d", o.Shard, o.Stream, o.Seq, o.SubSeq)
}

// refused returns err, the error of writing b, marked as no retry fixes
// and naming ByKey's fix, Config.DeadLetters, if it is sink/kinesis's
// stream.RecordErrors for records Kinesis would refuse: the driver would
// otherwise advise stream.Quarantine, which ByKey's output cannot be
// given. encode refuses first the records Kinesis would refuse (too
// large), which Config.DeadLetters catches; a record it lets through stops
// Run even with quarantine set. Any other error is returned as it is.
func refused(b *batch.Batch[encoded], err error, quarantine bool) error {
	re, ok := errors.AsType[*stream.RecordErrors](err)
	if !ok || len(re.Errs) == 0 {
		return err
	}
	first := slices.Min(slices.Collect(maps.Keys(re.Errs)))
	fix := deadLettersFix
	if quarantine {
		fix = "ByKey's own checks let it through, so Config.DeadLetters does not catch it: a bug of ByKey's, to be reported"
	}
	// The error wrapped names each record sink/kinesis refuses, and why.
	return noretry.Mark(fmt.Errorf("repartition: ByKey cannot write %s (record %d of its batch) to Kinesis: %w: %s", recordAt(b.Origins(), first), first, err, fix))
}

// newReceiver returns the receiver reading cfg.Stream back, or an error
// wrapping ErrInvalidConfig if it refuses cfg (its Leases).
func newReceiver[K comparable, V any](cfg Config[K, V]) (*source.Receiver, error) {
	rc := source.Config{Stream: cfg.Stream, App: cfg.Stream, InitialPosition: source.TrimHorizon,
		AWS: cfg.AWS, Endpoint: cfg.Endpoint}
	if cfg.Client != nil {
		rc.Client = cfg.Client
	}
	if cfg.Leases != nil {
		l := *cfg.Leases // a copy: the caller's is the source's too
		l.TableName = cfg.Stream + ".leases"
		if l.StateDir != "" {
			l.StateDir = filepath.Join(l.StateDir, l.TableName)
		}
		rc.Leases = &l
	}
	recv, err := source.New(rc)
	if errors.Is(err, source.ErrInvalidConfig) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err != nil {
		return nil, fmt.Errorf("repartition: %w", err)
	}
	return recv, nil
}

// create creates the stream name with shards shards unless it exists, and
// waits until it is ACTIVE, or UPDATING (being resharded, or its
// encryption, retention or mode changed), in which Kinesis serves reads
// and writes as in ACTIVE, for minutes or more: a worker restarted during a
// reshard of the stream must not wait for its end.
func create(ctx context.Context, kc *awskinesis.Client, name string, shards int) error {
	_, err := kc.CreateStream(ctx, &awskinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(int32(shards))})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("repartition: create stream %q: %w", name, err)
	}
	// The SDK's default first wait, 10s, is longer than a stream takes to
	// become ACTIVE (a few seconds on Kinesis).
	waiter := awskinesis.NewStreamExistsWaiter(kc, func(o *awskinesis.StreamExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 5*time.Second
		o.Retryable = usable
	})
	if err := waiter.Wait(ctx, &awskinesis.DescribeStreamInput{StreamName: aws.String(name)}, activeWait); err != nil {
		return fmt.Errorf("repartition: wait for stream %q to be ACTIVE: %w", name, err)
	}
	return nil
}

// usable is create's waiter's test: done once the stream is ACTIVE or
// UPDATING, failed on an error or a stream being deleted (which would
// never become ACTIVE), tried again otherwise (CREATING).
func usable(_ context.Context, in *awskinesis.DescribeStreamInput, out *awskinesis.DescribeStreamOutput, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	d := out.StreamDescription
	switch {
	case d == nil:
		return true, nil
	case d.StreamStatus == types.StreamStatusActive || d.StreamStatus == types.StreamStatusUpdating:
		return false, nil
	case d.StreamStatus == types.StreamStatusDeleting:
		return false, fmt.Errorf("stream %q is being deleted (DELETING): ByKey cannot use it; "+
			"start again once the deletion has ended, and ByKey creates it anew", aws.ToString(in.StreamName))
	}
	return true, nil
}
