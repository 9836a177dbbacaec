package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/origin"
)

// ErrInvalidConfig is wrapped by the error New returns for a Config it
// refuses; the message names every bad field and its fix.
var ErrInvalidConfig = errors.New("kinesis: invalid config")

// ErrInvalidRecord is wrapped by the error Write returns for a record
// Kinesis would refuse (an empty or too long partition key, a record too
// large); the message names the record's index in the batch and its key.
// Write checks every record before it sends any, so such a batch writes
// nothing, and returns a *stream.RecordErrors holding an error for each
// such record: with stream.Quarantine, those records are set aside and
// the others written.
var ErrInvalidRecord = errors.New("kinesis: invalid record")

// Client is the part of the Kinesis API the sink calls. *kinesis.Client of
// aws-sdk-go-v2 implements it.
type Client interface {
	// PutRecords writes up to 500 records.
	PutRecords(ctx context.Context, in *awskinesis.PutRecordsInput, optFns ...func(*awskinesis.Options)) (*awskinesis.PutRecordsOutput, error)
}

// Limits of PutRecords (Kinesis API reference, PutRecords).
const (
	// maxRequestRecords is the most records one PutRecords call takes.
	maxRequestRecords = 500
	// defaultMaxRecordBytes is a stream's maximum record size, data and
	// partition key together, unless raised (UpdateMaxRecordSize).
	defaultMaxRecordBytes = 1 << 20
	// maxRecordBytes is the most a stream's maximum record size can be
	// raised to.
	maxRecordBytes = 10 << 20
	// requestBytes is the most data and partition keys one PutRecords call
	// takes everywhere, and largeRequestBytes where a stream's records may
	// be larger than 1 MiB: the request limit was raised with the record
	// size.
	requestBytes      = 5 << 20
	largeRequestBytes = 10 << 20
)

// Config configures a Sink of records of type T. Client, Stream and Record
// are required.
type Config[T any] struct {
	// Client is the Kinesis client the records are put with. Its own
	// retries (the SDK's retryer) apply to each call; the Sink retries on
	// top of them, on Clock, whatever fails for a reason a retry can fix,
	// until Write's ctx is done. Required.
	Client Client
	// Stream is the name or the ARN (starting "arn:") of the stream to
	// write to. Required.
	Stream string
	// Record returns the partition key and the data of one record. The
	// key must be 1 to 256 characters of valid UTF-8, counted in UTF-16
	// code units as Kinesis does (an emoji counts 2); the key and
	// the data (with the origin tag, if Origin is set) must not be larger
	// than MaxRecordBytes. Data may be empty or nil (a record of no
	// data). Write keeps the data only until it returns. Required.
	Record func(v T) (partitionKey string, data []byte)
	// Origin, when set, names this writer in an origin tag prepended to
	// every record's data, so that a weir pipeline reading the stream can
	// drop the copies a batch replayed after a crash writes again, for
	// exactly-once delivery from one pipeline to the next. It must be the
	// same across the pipeline's restarts (with the same recovery log) and
	// differ from every other writer of the stream, such as the
	// application's and the output's names; at most 128 bytes. A record is
	// known by its batch time and its index in the batch, so a recomputed
	// batch must hold the same records in the same order, which weir's
	// operators ensure when the functions given to them are deterministic
	// (no map iteration order, clock or randomness in what they emit):
	// otherwise a reader may drop a recomputed record that differs from the
	// one first written at its index. The tag changes the records' data:
	// leave Origin empty, the default, when other programs read the stream.
	// When the batch has origins (the sink's Write given to
	// stream.ForEachBatch with the stream.Origins option, downstream of
	// weir's Kinesis receiver through narrow operators), the tag names
	// each record's origin instead (version 2): the source record it came
	// from and the start of the batch's range of its shard, the same
	// whichever worker of a fleet writes it, so copies written after a
	// lease moved, or by a zombie worker, are dropped too. A Sink with
	// Origin is one writer of records without origins: two outputs writing
	// batches without origins through it, or through two Sinks of the same
	// Origin and stream, give records of a batch time the same tags, and a
	// reader drops one's as copies of the other's; give each output a Sink
	// of its own Origin (such a Write from a second output of a pipeline's
	// Run fails it at once). A version 2 tag does not name the writer at
	// all, so a stream may have one writer with origins per source stream:
	// a reader drops, as copies, the records of a second output or
	// pipeline that writes records of the same source records with
	// origins, whatever its Origin (a Write of a record of an origin
	// another output of the Run wrote to the stream in the same batch, with
	// this Sink or another of the process, fails it at once). Outputs of one pipeline writing records of
	// distinct source records with origins, such as a stream split by
	// Filter, may share the stream and the Sink. A pipeline
	// without a recovery log (stream.HasRecovery) takes its batch times
	// from the wall clock, and a Run whose clock is behind an earlier Run's
	// batches gives its batches their times again: the writer of records
	// without origins is then Origin, "/" and a random name of the Run, so
	// that a reader does not drop them as copies of the earlier Run's
	// records of the same tags (such a Run runs no batch of an earlier Run
	// again: nothing is kept twice); Origin must then be at most 111
	// bytes. DESIGN.md describes the formats.
	Origin string
	// Worker, when set, names this worker among the workers of a fleet in
	// the origin tags of records without origins (version 1), whose writer
	// is then Origin + "/" + Worker: it must differ from every other
	// worker's and stay the same across this worker's restarts (with its
	// recovery log), such as a StatefulSet pod's name. Two workers
	// configured alike write batches of the same times (batch times are
	// multiples of the interval), so a writer named by Origin alone would
	// give their different records the same tags, and a reader would drop
	// one as a copy of the other. When Worker is empty and the pipeline's
	// source shares its shards with other workers (stream.SharesShards: a
	// Kinesis receiver with leases), the writer is Origin + "/" + a random
	// name drawn by New, distinct for each Sink: no record is lost, but a
	// batch a restarted worker runs again is written under a new name, and
	// its copies are kept (at least once; a warning says so once). Records with
	// origins (version 2 tags) ignore it, and so does a pipeline without a
	// recovery log (see Origin). Origin must be set with it; the
	// two with the "/" at most 128 bytes. Default "".
	Worker string
	// Aggregate, when true, packs the records of one partition key that a
	// call would otherwise have to send one call after another into a KPL
	// aggregate (the Kinesis Producer Library's format), one Kinesis record
	// of up to MaxRecordBytes, which is written or fails as a whole: a
	// batch whose records share few keys then needs far fewer calls. A
	// consumer must de-aggregate the records: the Kinesis Client Library
	// and weir's Kinesis receiver do; other programs may not. Each record in
	// an aggregate keeps its origin tag. Default false: one Kinesis record
	// per record.
	Aggregate bool
	// MaxRecordBytes is the largest record the stream takes, data and
	// partition key (and origin tag) together, in bytes: a record larger
	// than it fails Write before anything is sent. Default 1 MiB, the
	// default of every stream; up to 10 MiB for a stream whose maximum
	// record size was raised. Above 1 MiB, a PutRecords call holds up to
	// 10 MiB instead of 5 MiB, as Kinesis allows with large records.
	MaxRecordBytes int
	// Logger receives the warnings of retries that keep failing. Default:
	// slog.Default().
	Logger *slog.Logger
	// Clock times the back-off between retries and the timeout of each
	// call (30 s). Default: clock.Real.
	Clock clock.Clock
}

func (c Config[T]) withDefaults() Config[T] {
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = defaultMaxRecordBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Clock = clock.Or(c.Clock)
	return c
}

func (c Config[T]) validate() error {
	var problems []error
	if c.Client == nil {
		problems = append(problems, errors.New("Client nil: set the Kinesis client (kinesis.NewFromConfig)"))
	}
	if c.Stream == "" {
		problems = append(problems, errors.New("Stream empty: set the name or ARN of the stream to write to"))
	} else if err := awsconf.CheckStream(c.Stream); err != nil {
		problems = append(problems, err)
	}
	if c.Record == nil {
		problems = append(problems, errors.New("Record nil: set the function that gives a record's partition key and data"))
	}
	if len(c.Origin) > origin.MaxWriterLen {
		problems = append(problems, fmt.Errorf("Origin of %d bytes: must be at most %d", len(c.Origin), origin.MaxWriterLen))
	}
	switch {
	case c.Worker != "" && c.Origin == "":
		problems = append(problems, errors.New("Worker set without Origin: set Origin to tag the records, or leave Worker empty"))
	case c.Worker != "" && len(c.Origin)+1+len(c.Worker) > origin.MaxWriterLen:
		problems = append(problems, fmt.Errorf("Origin and Worker of %d bytes with the \"/\": must be at most %d", len(c.Origin)+1+len(c.Worker), origin.MaxWriterLen))
	}
	if c.MaxRecordBytes < 0 || c.MaxRecordBytes > maxRecordBytes {
		problems = append(problems, fmt.Errorf("MaxRecordBytes %d: must be between 1 and %d (10 MiB), or 0 for 1 MiB", c.MaxRecordBytes, maxRecordBytes))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// isARN reports whether stream is a stream's ARN rather than its name.
func isARN(stream string) bool { return strings.HasPrefix(stream, "arn:") }
