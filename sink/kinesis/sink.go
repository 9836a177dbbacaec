package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/hashkey"
	"github.com/weirstream/weir/internal/noretry"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/internal/outputid"
	"github.com/weirstream/weir/internal/runname"
	"github.com/weirstream/weir/internal/streak"
	"github.com/weirstream/weir/stream"
)

// Back-off between the rounds of a Write that had failures.
const (
	retryBase = 100 * time.Millisecond
	retryMax  = 5 * time.Second
)

// callTimeout bounds each PutRecords call, the client's own retries
// included: a call of 5 MiB answers well within it on a healthy
// connection, and one with no answer (a connection gone silent) is
// abandoned and tried again, its records' outcome unknown, rather than
// holding the batch for good.
const callTimeout = 30 * time.Second

// arenaSize is the size of the buffers tagged records are built in.
const arenaSize = 1 << 20

// noData is the data of a record with none: empty, not nil.
var noData = []byte{}

// Sink writes batches to a Kinesis stream. Its Write is a
// stream.ForEachBatch function. A Sink holds no resources (the client is
// the caller's) and is safe for concurrent use, though a pipeline calls it
// one batch at a time.
type Sink[T any] struct {
	cfg          Config[T]
	endpoint     string        // for the logs
	requestBytes int           // the most bytes of records a call holds
	timeout      time.Duration // callTimeout; tests shorten it
	// fleetWriter is the writer of version 1 tags on a fleet: Origin and
	// Worker, or Origin and a random name when Worker is empty, and
	// fleetNote says once which.
	fleetWriter string
	fleetNote   sync.Once

	// at is where the Sink's client sends requests (see streamKey).
	at any
	// v2 is what the outputs of a pipeline's Run wrote with version 2 tags
	// in its latest batch, by origin, with the Sinks of the process
	// writing to the same stream: another output's record of the same
	// origin is refused (see oneOrigin).
	v2 *outputid.Written[batch.Origin, originPos]
}

// Records of one stream are tagged alike by every Sink that writes to it
// (version 2 tags), or by every Sink of the same writer (version 1): so
// what the outputs of a Run wrote is recorded per stream (and writer) for
// the Sinks of the process, and two Sinks given to two outputs collide as
// one Sink given to both does.
var (
	// writers is, by stream and writer, the output of a pipeline's Run
	// that writes batches without origins (version 1 tags) as that
	// writer: another output of that Run writing such a batch is refused
	// (see oneWriter). An entry is dropped when the Run that claimed it
	// last ends, and made only for a pipeline output's Write, so it holds
	// the writers of the Runs still running, not every writer the process
	// ever had (a dead-letter stream's, one per set of records
	// quarantined; a Run's own without a recovery log).
	writers   = make(map[streamKey]*runWriter)
	writersMu sync.Mutex // guards writers and its entries' run and stop
	origins   sync.Map   // streamKey -> *outputid.Written[batch.Origin, originPos]
)

// runWriter is an entry of writers: the output that writes as the writer,
// the Run it belongs to, and what drops the entry when that Run ends.
type runWriter struct {
	owner outputid.Owner
	run   string      // the Run that claimed owner last
	stop  func() bool // stops the drop at the end of run
}

// streamKey names a stream written to and, for version 1 tags, the
// writer. The stream is named by its name and where the Sink's client
// sends requests: its endpoint or region, or for a client of another type
// the client itself if it is a pointer (another value, a Sink's own,
// shared with no other).
type streamKey struct {
	at             any
	stream, writer string
}

// clientAt returns where client sends requests, for a streamKey.
func clientAt(client Client) any {
	if c, ok := client.(*awskinesis.Client); ok {
		o := c.Options()
		if o.BaseEndpoint != nil {
			return "endpoint " + *o.BaseEndpoint
		}
		return "region " + o.Region
	}
	// A pointer only: a comparable type may hold, in an interface field,
	// a value that cannot be hashed, and a key of it would panic.
	if reflect.TypeOf(client).Kind() == reflect.Pointer {
		return client
	}
	return new(byte)
}

// originPos is what a version 2 tag names of a record: its origin shard
// and position there, the same in every output's record of that position.
type originPos struct {
	stream, shard, seq string
	subSeq             int64
	index              int
}

// posOf returns the position a version 2 tag names of a record of origin o.
func posOf(o batch.Origin) originPos {
	return originPos{o.Stream, o.Shard, o.Seq, o.SubSeq, o.Index}
}

// New returns a Sink configured by cfg, or an error wrapping
// ErrInvalidConfig that names every bad field.
func New[T any](cfg Config[T]) (*Sink[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sink[T]{cfg: cfg.withDefaults(), requestBytes: requestBytes, timeout: callTimeout}
	if cfg.Origin != "" {
		worker := cfg.Worker
		if worker == "" {
			worker = origin.RandomWriter()
		}
		s.fleetWriter = cfg.Origin + "/" + worker
	}
	if s.cfg.MaxRecordBytes > defaultMaxRecordBytes {
		s.requestBytes = largeRequestBytes
	}
	if c, ok := cfg.Client.(*awskinesis.Client); ok {
		s.endpoint = aws.ToString(c.Options().BaseEndpoint)
	}
	s.at = clientAt(cfg.Client)
	v2, _ := origins.LoadOrStore(streamKey{at: s.at, stream: cfg.Stream}, &outputid.Written[batch.Origin, originPos]{Key: posOf})
	s.v2 = v2.(*outputid.Written[batch.Origin, originPos])
	return s, nil
}

// entry is one record of a batch, ready to put.
type entry struct {
	key  string
	data []byte
}

// Write puts the records of b to the stream and returns once every one of
// them is written, in the order of the batch for each partition key: a
// record is sent only after every earlier record of its key was
// acknowledged, so a PutRecords call holds at most one record per key, and
// a record that failed (throttled, an internal failure) is sent again
// before any later record of its key. Records that failed with a code
// time heals (ProvisionedThroughputExceededException, InternalFailure,
// KMSThrottlingException) are retried, with back-off, until they are
// written or ctx is done, as is a call with no answer within 30 s (its
// records may then be written twice); a record failing with another code
// fails Write at once (marked as no retry fixes when it is the stream's
// refusal: its KMS key's, IAM's, the stream gone); whatever
// a retry cannot fix (the stream does not exist, access denied, an invalid
// request) fails Write with the SDK's error and, when it is known, the fix
// (the IAM or KMS action to allow, the stream to create); a refusal of
// the whole stream (missing, access denied, credentials not valid, its
// KMS key) fails it as no retry fixes: the pipeline neither tries the
// output again nor quarantines its records, since every record would be
// refused alike. Records are sent from one goroutine, one call at a time,
// up to 500 records and 5 MiB a call (10 MiB with MaxRecordBytes above 1
// MiB). The first record not yet written
// always fits in a call, so every call holds at least one record.
//
// Every record is checked before any is sent: records Kinesis would
// refuse fail Write with a *stream.RecordErrors holding, for each, an
// error wrapping ErrInvalidRecord that names its index and partition key,
// and nothing of the batch is written. Given to stream.ForEachBatch with
// stream.Quarantine, those records are set aside, each with its error,
// and Write is called again with the others. An error
// after some records were written leaves them written: a batch that runs
// again (a retried or recomputed batch) writes them again, and with Origin
// set a weir reader drops those copies.
//
// With Origin set, outputs of a pipeline share a Sink only as far as
// their tags cannot meet, as a reader would drop one output's records as
// copies of the other's: a batch without origins (version 1 tags, naming
// the Sink's writer, the batch time and the index) from another output of
// the Run than the one that wrote such batches fails Write, as no retry
// fixes; so does, in a batch with origins (version 2 tags, naming the
// origin alone), a record of an origin another output of the Run wrote in
// the same batch. Outputs writing records of distinct source records with
// origins, or one without and the others with, share it. Two Sinks of the
// process writing to the same stream are held to the same rule as one:
// they share what the outputs of a Run wrote (by writer, for batches
// without origins).
func (s *Sink[T]) Write(ctx context.Context, b *batch.Batch[T]) error {
	if b.Len() == 0 {
		return nil
	}
	writer := s.cfg.Origin
	v2 := writer != "" && allOrigins(b.Origins())
	if writer != "" && !v2 {
		var err error
		if writer, err = s.writer(ctx); err != nil {
			return err
		}
		if err := s.oneWriter(ctx, writer); err != nil {
			return err
		}
	}
	recs, err := s.prepare(b, writer)
	if err != nil {
		return err
	}
	if v2 {
		if err := s.oneOrigin(ctx, b.Time(), b.Origins()); err != nil {
			return err
		}
	}
	return s.put(ctx, recs)
}

// oneWriter returns an error, marked as no retry fixes (internal/noretry),
// if ctx is that of another output of the pipeline's Run than the one that
// wrote batches without origins as writer to the Sink's stream before,
// with this Sink or another: both outputs' records of a batch would get
// the same version 1 tags (the same writer, batch time and index), and a
// reader's duplicate filter would drop one output's records as copies of
// the other's. Called only with Origin set: untagged records are not
// filtered. A ctx that is not a pipeline output's (a dead-letter stream's
// Quarantine) claims nothing, and leaves no entry in writers; the entry
// an output's claim made is dropped once the Run that claimed it last
// ends, as no output of that Run writes again and a later Run would take
// the writer over.
func (s *Sink[T]) oneWriter(ctx context.Context, writer string) error {
	run, _, ok := outputid.InRun(ctx)
	if !ok {
		return nil
	}
	key := streamKey{s.at, s.cfg.Stream, writer}
	writersMu.Lock()
	w := writers[key]
	if w == nil {
		w = new(runWriter)
		writers[key] = w
	}
	clash, first := w.owner.Claim(ctx, false)
	if clash == outputid.None && w.run != run {
		// This Run took the writer over: its end, not the earlier Run's,
		// drops the entry.
		if w.stop != nil {
			w.stop()
		}
		w.run, w.stop = run, context.AfterFunc(ctx, func() { dropWriter(key, w, run) })
	}
	writersMu.Unlock()
	if clash != outputid.None {
		out, _ := outputid.Of(ctx)
		return noretry.Mark(fmt.Errorf("kinesis: output %d of the pipeline writes batches without origins to stream %s as writer %q (with this Sink or another), and so does output %d: "+
			"both outputs' records of a batch would have the same origin tags (the writer, the batch time and the record's index), and a reader would drop one output's as copies of the other's; "+
			"give each output a Sink of its own, each with an Origin of its own", first, s.cfg.Stream, writer, out))
	}
	return nil
}

// dropWriter removes w, the entry of key, from writers once Run run has
// ended, unless another Run claimed it since.
func dropWriter(key streamKey, w *runWriter, run string) {
	writersMu.Lock()
	defer writersMu.Unlock()
	if writers[key] == w && w.run == run {
		delete(writers, key)
	}
}

// oneOrigin returns an error, marked as no retry fixes (internal/noretry),
// if ctx is that of an output of a pipeline's Run and another output of
// that Run wrote in batch t a record of an origin among origins (those of
// the records of the output's batch t): both records would get the same
// version 2 tag, which names no writer, and a reader's duplicate filter
// would drop one as a copy of the other. Outputs writing records of
// distinct origins share the Sink: the tags of a batch's records name its
// range starts, the same for every output, and its batch runs to its end
// before the next starts, so a reader drops none of their first copies.
// It records origins as the output's.
func (s *Sink[T]) oneOrigin(ctx context.Context, t batch.Time, origins []batch.Origin) error {
	if first, out, o, clash := s.v2.Claim(ctx, int64(t), origins); clash {
		return noretry.Mark(fmt.Errorf("kinesis: output %d of the pipeline writes to stream %s (with this Sink or another) a record of origin %s/%s sequence number %s, sub-sequence %d, index %d, and so does output %d in the same batch: "+
			"both records would have the same origin tag, which names no writer, and a reader would drop one as a copy of the other, whatever their Sinks' Origin; "+
			"let one output write the records of each source record, or give each output a stream of its own", first, s.cfg.Stream, o.Stream, o.Shard, o.Seq, o.SubSeq, o.Index, out))
	}
	return nil
}

// allOrigins reports whether every record of a batch has an origin, and so
// a version 2 tag, which names no writer.
func allOrigins(origins []batch.Origin) bool {
	if origins == nil {
		return false
	}
	for _, o := range origins {
		if o.Seq == "" {
			return false
		}
	}
	return true
}

// writer returns the writer of the version 1 tags of a Write with ctx
// (Origin is set): Origin and the name of the pipeline's Run when ctx is
// that of a pipeline without a recovery log, whose batch times may repeat
// an earlier Run's; otherwise Origin on one worker unless Worker is set,
// Origin and this worker's name (Worker, or a random one) when Worker is
// set or ctx is that of a pipeline sharing its source's shards with other
// workers. Its errors, the same at every try, are marked as no retry
// fixes (internal/noretry): they fail Run at once.
func (s *Sink[T]) writer(ctx context.Context) (string, error) {
	if run := runname.Of(ctx); run != "" && !stream.HasRecovery(ctx) {
		w := s.cfg.Origin + "/" + run
		if len(w) > origin.MaxWriterLen {
			return "", noretry.Mark(fmt.Errorf("%w: Origin of %d bytes: the pipeline has no recovery log, so the tags of records without origins name its Run too: "+
				"Origin must be at most %d bytes, or set stream.Config.Recovery", ErrInvalidConfig, len(s.cfg.Origin), origin.MaxWriterLen-1-runname.Len))
		}
		return w, nil
	}
	if s.cfg.Worker == "" && !stream.SharesShards(ctx) {
		return s.cfg.Origin, nil
	}
	if len(s.fleetWriter) > origin.MaxWriterLen {
		return "", noretry.Mark(fmt.Errorf("%w: Origin of %d bytes: the pipeline's source shares its shards with other workers, so the tags of records without origins name this worker too: "+
			"Origin must be at most %d bytes, or set Worker", ErrInvalidConfig, len(s.cfg.Origin), origin.MaxWriterLen-1-origin.RandomWriterLen))
	}
	if s.cfg.Worker == "" {
		s.fleetNote.Do(func() {
			s.cfg.Logger.Warn("kinesis sink: the pipeline's source shares its shards with other workers and Worker is empty: "+
				"records without origins are tagged with a random name of this worker, so a batch it runs again after a restart is written under another name and read twice; "+
				"set Worker to a name distinct per worker and stable across restarts for exactly once",
				"stream", s.cfg.Stream, "writer", s.fleetWriter)
		})
	}
	return s.fleetWriter, nil
}

// prepare returns the records of b as entries, tagged if Origin is set
// (version 1 tags naming writer), or a *stream.RecordErrors naming every
// record Kinesis would refuse.
func (s *Sink[T]) prepare(b *batch.Batch[T], writer string) ([]entry, error) {
	recs := make([]entry, 0, b.Len())
	var invalid *stream.RecordErrors
	var arena []byte
	origins := b.Origins()
	var starts map[[2]string]string
	for v := range b.All() {
		i := len(recs)
		key, data := s.cfg.Record(v)
		if s.cfg.Origin != "" {
			tag := origin.Tag{Writer: writer, Batch: int64(b.Time()), Index: uint64(i)}
			if origins != nil && origins[i].Seq != "" {
				if starts == nil {
					starts = rangeStarts(b.Ranges())
				}
				t, err := originTag(origins[i], starts)
				if err != nil {
					return nil, fmt.Errorf("%w: record %d of batch %d, partition key %q: %w", ErrInvalidRecord, i, int64(b.Time()), key, err)
				}
				tag = t
			}
			n := origin.Overhead(tag) + len(data)
			if cap(arena)-len(arena) < n {
				arena = make([]byte, 0, max(arenaSize, n))
			}
			start := len(arena)
			arena = origin.Append(arena, tag, data)
			data = arena[start:len(arena):len(arena)]
		}
		if data == nil {
			// Kinesis takes a record of no data, but the AWS SDK refuses a
			// nil Data as a missing field, before sending the call.
			data = noData
		}
		if err := s.check(key, data); err != nil {
			if invalid == nil {
				invalid = &stream.RecordErrors{Errs: make(map[int]error)}
			}
			invalid.Errs[i] = fmt.Errorf("%w: record %d of batch %d, partition key %q: %w", ErrInvalidRecord, i, int64(b.Time()), key, err)
		}
		recs = append(recs, entry{key: key, data: data})
	}
	if invalid != nil {
		return nil, invalid
	}
	return recs, nil
}

// rangeStarts returns the first sequence number of each shard (stream,
// shard) among ranges.
func rangeStarts(ranges []batch.SeqRange) map[[2]string]string {
	starts := make(map[[2]string]string)
	for _, r := range ranges {
		k := [2]string{r.Stream, r.Shard}
		if s, ok := starts[k]; !ok || batch.SeqLess(r.First, s) {
			starts[k] = r.First
		}
	}
	return starts
}

// originTag returns the version 2 tag of a record of origin o, whose batch
// starts its range of o's shard at starts[o's stream and shard].
func originTag(o batch.Origin, starts map[[2]string]string) (origin.Tag, error) {
	start, ok := starts[[2]string{o.Stream, o.Shard}]
	switch {
	case !ok:
		return origin.Tag{}, fmt.Errorf("origin shard %s/%s is not among the batch's ranges", o.Stream, o.Shard)
	case len(o.Stream) > origin.MaxNameLen || len(o.Shard) > origin.MaxNameLen:
		return origin.Tag{}, fmt.Errorf("origin stream name or shard ID longer than %d bytes", origin.MaxNameLen)
	case o.SubSeq < 0 || o.Index < 0:
		return origin.Tag{}, fmt.Errorf("origin sub-sequence %d or index %d negative", o.SubSeq, o.Index)
	}
	if err := batch.ValidateSeq(o.Seq); err != nil {
		return origin.Tag{}, fmt.Errorf("origin: %w", err)
	}
	if batch.SeqLess(o.Seq, start) {
		return origin.Tag{}, fmt.Errorf("origin sequence number %s before its batch's range start %s", o.Seq, start)
	}
	return origin.Tag{Stream: o.Stream, Shard: o.Shard, Seq: o.Seq, SubSeq: uint64(o.SubSeq), Index: uint64(o.Index), RangeStart: start}, nil
}

// check returns why Kinesis would refuse a record, or nil.
func (s *Sink[T]) check(key string, data []byte) error {
	switch {
	case key == "":
		return errors.New("empty: a partition key must be 1 to 256 characters")
	case !utf8.ValidString(key):
		return errors.New("not valid UTF-8")
	case hashkey.PartitionKeyLen(key) > hashkey.MaxPartitionKeyLen:
		return fmt.Errorf("%d characters (in UTF-16 code units, as Kinesis counts them: one outside the Basic Multilingual Plane, such as an emoji, counts 2), more than the 256 a partition key may have",
			hashkey.PartitionKeyLen(key))
	case len(key)+len(data) > s.cfg.MaxRecordBytes:
		tagged := ""
		if s.cfg.Origin != "" {
			tagged = " and origin tag"
		}
		return fmt.Errorf("%d bytes of data%s and partition key, more than MaxRecordBytes (%d): split the record, or raise the stream's maximum record size and MaxRecordBytes", len(key)+len(data), tagged, s.cfg.MaxRecordBytes)
	}
	return nil
}

// put writes recs in rounds of one PutRecords call each, until every one
// is acknowledged. pending holds the indexes of the records not yet
// acknowledged, in batch order. A round's call (see call) holds, for each
// partition key, only its first pending record, or with Config.Aggregate
// an aggregate of its first pending ones: so a record never travels with,
// or after, a later record of its key. It looks no further than
// origin.Window records past the first pending one, the window a reader's
// duplicate filter relies on (and the bound of a round's scan).
func (s *Sink[T]) put(ctx context.Context, recs []entry) error {
	pending := make([]int32, len(recs))
	for i := range pending {
		pending[i] = int32(i)
	}
	in := &awskinesis.PutRecordsInput{}
	if isARN(s.cfg.Stream) {
		in.StreamARN = aws.String(s.cfg.Stream)
	} else {
		in.StreamName = aws.String(s.cfg.Stream)
	}
	c := newCall(s.requestBytes, s.cfg.MaxRecordBytes, s.cfg.Aggregate)
	var reqEntries []types.PutRecordsRequestEntry
	acked := make([]bool, len(recs))
	wait := backoff.Policy{Base: retryBase, Max: retryMax}.Start()
	st := s.streak()
	tries := 0
	for len(pending) > 0 {
		c.build(recs, pending, int(pending[0])+origin.Window)
		if len(c.kin) == 0 { // cannot happen: the first pending record always fits
			r := recs[pending[0]]
			return fmt.Errorf("kinesis: record %d (partition key %q, %d bytes) fits no PutRecords call of %d bytes", pending[0], r.key, len(r.key)+len(r.data), s.requestBytes)
		}
		reqEntries = c.entries(reqEntries, recs)
		in.Records = reqEntries
		tries++
		actx, cancel := attempt.WithTimeout(ctx, s.cfg.Clock, s.timeout)
		out, err := s.cfg.Client.PutRecords(actx, in)
		err = attempt.Error(actx, err, s.timeout)
		cancel()
		if err == nil && len(out.Records) != len(reqEntries) {
			return fmt.Errorf("kinesis: PutRecords to stream %q answered %d results for %d records; cannot tell which were written", s.cfg.Stream, len(out.Records), len(reqEntries))
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("kinesis: writing to stream %q: %w", s.cfg.Stream, context.Cause(ctx))
			}
			if refused(err) {
				err = fmt.Errorf("kinesis: PutRecords to stream %q: %w", s.cfg.Stream, s.withFix(err))
				if awserr.TargetRefused(err) {
					// The stream's refusal, not the records': every call
					// is refused alike (see internal/noretry).
					err = noretry.Mark(err)
				}
				return err
			}
			cause := callCause(err)
			st.Failed(tries, cause, cause == "timeout", err) // a silent call holds Write the whole timeout: warn at once
			if err := wait.Wait(ctx, s.cfg.Clock); err != nil {
				return fmt.Errorf("kinesis: writing to stream %q: %w", s.cfg.Stream, context.Cause(ctx))
			}
			continue
		}
		failed, res := c.settle(out, acked)
		pending = compact(pending, acked)
		if failed == 0 {
			if tries > 1 {
				st.Ended(tries)
				st = s.streak()
			}
			tries = 0
			wait.Reset()
			continue
		}
		if code := aws.ToString(res.ErrorCode); !retriedCode[code] {
			return s.recordsRefused(code, aws.ToString(res.ErrorMessage), failed, len(reqEntries))
		}
		if failed < len(reqEntries) {
			wait.Reset() // progress: wait the shortest back-off
		}
		st.Failed(tries, aws.ToString(res.ErrorCode), false, fmt.Errorf("%d of %d records failed, the first with %s: %s",
			failed, len(reqEntries), aws.ToString(res.ErrorCode), aws.ToString(res.ErrorMessage)))
		if err := wait.Wait(ctx, s.cfg.Clock); err != nil {
			return fmt.Errorf("kinesis: writing to stream %q: %w", s.cfg.Stream, context.Cause(ctx))
		}
	}
	return nil
}

// retriedCode holds the per-record error codes of a PutRecords result that
// time heals, retried with back-off for as long as Kinesis answers them:
// the two the API reference documents for a record (its shard's
// throughput exceeded, an internal failure) and the throttling of the
// stream's KMS key. Any other code fails the Write (recordsRefused).
var retriedCode = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"InternalFailure":                        true,
	"KMSThrottlingException":                 true,
}

// recordsRefused returns the error of a PutRecords call whose failed
// records (failed of sent), the first with code and msg, failed with a
// code no retry with back-off is known to heal. A code of the stream's
// refusal (its KMS key's, IAM's, the stream gone: every record is refused
// alike) is marked as no retry fixes, with its fix, so that Run stops at
// once; another code weir does not know is returned unmarked, for the
// output's retries, bounded, to try again: the Write is not retried for
// as long as Kinesis answers it.
func (s *Sink[T]) recordsRefused(code, msg string, failed, sent int) error {
	cause := recordError(code, msg)
	err := fmt.Errorf("kinesis: PutRecords to stream %q: %d of %d records failed, the first with %w", s.cfg.Stream, failed, sent, s.withFix(cause))
	if awserr.TargetRefused(cause) {
		return noretry.Mark(err)
	}
	return fmt.Errorf("%w (an error code of a record weir does not know to heal with time: not retried in this write)", err)
}

// recordError returns a per-record error code of a PutRecords result, and
// its message, as the error of the same code a whole call gets, so that
// the refusals of the stream and their fixes are told apart as for a call.
func recordError(code, msg string) error {
	m := aws.String(msg)
	switch code {
	case "KMSAccessDeniedException":
		return &types.KMSAccessDeniedException{Message: m}
	case "KMSDisabledException":
		return &types.KMSDisabledException{Message: m}
	case "KMSNotFoundException":
		return &types.KMSNotFoundException{Message: m}
	case "KMSInvalidStateException":
		return &types.KMSInvalidStateException{Message: m}
	case "KMSOptInRequired":
		return &types.KMSOptInRequired{Message: m}
	case "AccessDeniedException":
		return &types.AccessDeniedException{Message: m}
	case "ResourceNotFoundException":
		return &types.ResourceNotFoundException{Message: m}
	}
	return &smithy.GenericAPIError{Code: code, Message: msg}
}

// compact removes the acknowledged indexes from pending, keeping the order.
func compact(pending []int32, acked []bool) []int32 {
	kept := pending[:0]
	for _, i := range pending {
		if !acked[i] {
			kept = append(kept, i)
		}
	}
	return kept
}

// refused reports whether err is one no retry of PutRecords fixes. KMS
// throttling is a client fault the SDK does not count as throttling, but
// it passes.
func refused(err error) bool {
	var kms *types.KMSThrottlingException
	return !errors.As(err, &kms) && awserr.Refused(err)
}

// callCause names the cause of a PutRecords call that failed as a whole,
// for the logs: the throttling error's code (the stream's shards, its KMS
// key); "timeout" for a call with no answer within the call timeout,
// unless the client was waiting to retry an answer (the SDK's retryer then
// returns an *aws.RequestCanceledError); else "error".
func callCause(err error) string {
	var (
		shards   *types.ProvisionedThroughputExceededException
		kms      *types.KMSThrottlingException
		retrying *aws.RequestCanceledError
	)
	switch {
	case errors.As(err, &shards):
		return shards.ErrorCode()
	case errors.As(err, &kms):
		return kms.ErrorCode()
	case errors.Is(err, attempt.ErrTimeout) && !errors.As(err, &retrying):
		return "timeout"
	}
	return "error"
}

// streak returns the warning of a Write whose calls keep failing.
func (s *Sink[T]) streak() streak.Streak {
	return streak.Streak{
		Logger: s.cfg.Logger, Clock: s.cfg.Clock, Prefix: "kinesis sink", Service: "Kinesis",
		Op: "PutRecords", Attr: slog.String("stream", s.cfg.Stream), Endpoint: s.endpoint,
		Fix: func(cause, endpoint string) string {
			switch cause {
			case "ProvisionedThroughputExceededException":
				return "a shard takes 1,000 records or 1 MiB per second: more shards, or partition keys spread over more of them"
			case "timeout":
				return "Kinesis at " + endpoint + " gave no answer within the call timeout (" + s.timeout.String() + "): check the network, proxies and the endpoint"
			case "KMSThrottlingException":
				return "the KMS requests of the stream's encryption exceed the account's KMS request quota in the region: retried meanwhile; if it lasts, raise the quota (Service Quotas, AWS KMS)"
			case "InternalFailure":
				return "Kinesis reports internal failures: usually transient; check the AWS Health Dashboard if it lasts"
			}
			return "check the network, the endpoint (" + endpoint + ") and the error"
		},
	}
}
