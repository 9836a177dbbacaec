package kinesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/letters"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/internal/runname"
	sinkkinesis "github.com/weirstream/weir/sink/kinesis"
	"github.com/weirstream/weir/stream"
)

// tagRoom is the room a record leaves for its partition key (a letter's ID
// is under 64 bytes) and its origin tag.
const tagRoom = 1 << 10

// minRecordBytes is the least Config.MaxRecordBytes New takes: the tag's
// room and 3 KiB for a letter, whose stack, record, panic and error Fit
// can cut but whose other fields (range, output name) it keeps.
const minRecordBytes = tagRoom + 3<<10

// Stream is a Kinesis stream of dead letters: a stream.DeadLetters. Each
// letter is one record: its JSON (stream.DeadLetter's fields), partition
// key its ID ("<batch time>-<output>-<index>", as weir deadletters names
// it), tagged with its origin (see sink/kinesis's Config.Origin) as writer
// "<Origin>/<output>/<fingerprint>", batch time and Index: one writer per
// output, since the letters of two outputs share batch times and indexes,
// and per set of records quarantined, the fingerprint naming them (a hash
// of each letter's Index, Range, Offset, Encoding and Record, not of its
// error or stack); on a fleet, followed by "/" and the worker's name
// (Config.Worker, or a random name the Stream draws in New; a warning
// says so once); without a recovery log, whose batch times may repeat an
// earlier Run's, by "/" and a random name of the pipeline's Run (see
// sink/kinesis's Config.Origin). A letter
// whose JSON, key and tag would not fit Config.MaxRecordBytes is cut
// first: its stack, then its record, then its panic and error, each to a
// prefix with a marker, a cut record's encoding prefixed "truncated:" so
// that it is not taken for the record (weir deadletters replay refuses
// it); each cut is logged at WARN. Its Range and Offset still name the
// source record.
//
// A Kinesis stream cannot replace records: a batch recomputed after a
// crash, or a Quarantine retried after an error, writes its letters
// again, with the same tags if they name the same records. The stream
// then holds a copy per attempt: at least once as records, exactly once
// for a weir pipeline that reads it with the origin filter (DESIGN.md,
// "Writing to Kinesis"), which keeps the first copy of each letter. A
// recomputed batch that fails other records than the first time (a flaky
// downstream) writes its letters under another fingerprint: the filter
// keeps them, and the first attempt's letters stay too (at least once). A Stream is safe for concurrent use and
// holds no resource to close (the client is the caller's).
type Stream struct {
	cfg    sinkkinesis.Config[stream.DeadLetter]
	logger *slog.Logger
	// worker names this Stream in the writer on a fleet when cfg.Worker is
	// empty: random, as the sink would draw for itself, but drawn once, as
	// each Quarantine has a sink of its own.
	worker    string
	fleetNote sync.Once
}

var _ stream.DeadLetters = (*Stream)(nil)

// New returns a Stream writing to cfg.Stream, configured as the sink of
// package sink/kinesis is, or an error wrapping sinkkinesis.ErrInvalidConfig
// that names every bad field. Record must be nil (the Stream encodes
// letters), Origin is required: it must stay the same across the
// pipeline's restarts and differ from every other writer of the stream,
// and leave room within a writer's 128 bytes for "/<output>/<fingerprint>"
// (up to 21 bytes), then "/" and Worker or a random name of 16 bytes (see
// Stream): at most 90 bytes without Worker. That limit counts outputs of
// up to 3 digits: a Quarantine of output 1000 or later, whose writer the
// longer output would take over 128 bytes, fails with an error wrapping
// sinkkinesis.ErrInvalidConfig that names Origin and the length it may
// have. MaxRecordBytes, if set, must
// be at least 4 KiB. Aggregate may be set (a consumer must then
// de-aggregate).
func New(cfg sinkkinesis.Config[stream.DeadLetter]) (*Stream, error) {
	var problems []error
	if cfg.Record != nil {
		problems = append(problems, errors.New("Record set: leave it nil, the dead-letter stream writes each letter's JSON"))
	}
	if cfg.Origin == "" {
		problems = append(problems, errors.New("Origin empty: name the pipeline writing the letters, so that their copies can be told apart"))
	}
	// The longest writer: Origin, an output of 3 digits, a fingerprint,
	// then a Worker or a random name (on a fleet, or of the Run without a
	// recovery log).
	if room := origin.MaxWriterLen - len(writerSuffix(999, strings.Repeat("F", letters.FingerprintLen))) - 1 - max(len(cfg.Worker), origin.RandomWriterLen); len(cfg.Origin) > room {
		problems = append(problems, fmt.Errorf("Origin of %d bytes: must be at most %d, to leave room for the output, the letters' fingerprint and the worker's or the Run's name", len(cfg.Origin), room))
	}
	if cfg.MaxRecordBytes != 0 && cfg.MaxRecordBytes < minRecordBytes {
		problems = append(problems, fmt.Errorf("MaxRecordBytes %d: a letter needs at least %d bytes (its fields, cut, and its tag): raise it, or leave it 0 for 1 MiB", cfg.MaxRecordBytes, minRecordBytes))
	}
	if len(problems) > 0 {
		// The sink's own fields too, so that one error names every bad
		// field (MaxRecordBytes once).
		probe := cfg
		probe.Record, probe.Origin = record, "o"
		if probe.MaxRecordBytes < minRecordBytes {
			probe.MaxRecordBytes = 0
		}
		if _, err := sinkkinesis.New(probe); err != nil {
			problems = append(problems, sinkProblems(err))
		}
		return nil, fmt.Errorf("%w: %w", sinkkinesis.ErrInvalidConfig, errors.Join(problems...))
	}
	cfg.Record = record
	s := &Stream{cfg: cfg, logger: cfg.Logger, worker: origin.RandomWriter()}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if _, err := s.sink(context.Background(), 999, strings.Repeat("F", letters.FingerprintLen)); err != nil { // the longest writer name
		return nil, err
	}
	return s, nil
}

// sinkProblems returns the problems err, the error of sinkkinesis.New
// refusing a Config, names, without ErrInvalidConfig's text.
func sinkProblems(err error) error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := u.Unwrap(); len(errs) == 2 && errs[0] == sinkkinesis.ErrInvalidConfig {
			return errs[1]
		}
	}
	return err
}

// writerSuffix returns what follows Origin in the writer of the letters of
// output o whose fingerprint is fp.
func writerSuffix(o int, fp string) string { return "/" + strconv.Itoa(o) + "/" + fp }

// sink returns a sink of the letters of output o whose fingerprint is fp,
// called with ctx: its writer is Origin, the output and the fingerprint.
// The sink is new, so that its writer names them (see Quarantine); on a
// fleet without Worker, it is given this Stream's name for the worker.
func (s *Stream) sink(ctx context.Context, o int, fp string) (*sinkkinesis.Sink[stream.DeadLetter], error) {
	cfg := s.cfg
	cfg.Origin += writerSuffix(o, fp)
	if cfg.Worker == "" && stream.SharesShards(ctx) && stream.HasRecovery(ctx) {
		cfg.Worker = s.worker
	}
	if err := s.fits(ctx, cfg, o); err != nil {
		return nil, err
	}
	if cfg.Worker != s.cfg.Worker {
		s.fleetNote.Do(func() {
			s.logger.Warn("deadletter stream: the pipeline's source shares its shards with other workers and Worker is empty: "+
				"letters are tagged with a random name of this worker, so a batch it runs again after a restart writes them again under another name, and they are read twice; "+
				"set Worker to a name distinct per worker and stable across restarts for exactly once",
				"stream", s.cfg.Stream, "worker", s.worker)
		})
	}
	return sinkkinesis.New(cfg)
}

// fits returns nil if the writers the sink of cfg, for output o, names in
// its tags with ctx fit a tag: cfg.Origin, the writer's start, then "/"
// and cfg.Worker if set, or the Run's name without a recovery log (see
// sink/kinesis's Config.Origin). Otherwise an error naming the Origin as
// the user gave it and the fix: New's limit counts outputs of up to 3
// digits, and output o may have more, a writer the sink would refuse
// naming the lengthened Origin.
func (s *Stream) fits(ctx context.Context, cfg sinkkinesis.Config[stream.DeadLetter], o int) error {
	n, name := len(cfg.Origin), ""
	if cfg.Worker != "" {
		n, name = len(cfg.Origin)+1+len(cfg.Worker), "the worker's name"
	}
	if runname.Of(ctx) != "" && !stream.HasRecovery(ctx) && len(cfg.Origin)+1+runname.Len > n {
		n, name = len(cfg.Origin)+1+runname.Len, "the Run's name (the pipeline has no recovery log)"
	}
	if n <= origin.MaxWriterLen {
		return nil
	}
	return fmt.Errorf("%w: Origin of %d bytes: the letters of output %d are tagged as writer Origin, %q, a fingerprint, \"/\" and %s, %d bytes, over a tag's %d: shorten Origin to at most %d bytes",
		sinkkinesis.ErrInvalidConfig, len(s.cfg.Origin), o, "/"+strconv.Itoa(o)+"/", name, n, origin.MaxWriterLen, len(s.cfg.Origin)-(n-origin.MaxWriterLen))
}

// fingerprint returns a name of which records letters are, their Index
// included (letters.Fingerprint).
func fingerprint(ls []stream.DeadLetter) string { return letters.Fingerprint(true, ls...) }

// record returns the partition key and data of letter l.
func record(l stream.DeadLetter) (string, []byte) {
	data, _ := json.Marshal(l) // no error: Quarantine's letters.Fit marshaled l
	return letters.ID(l), data
}

// Quarantine writes letters, all of one batch and output, one record each,
// and returns nil once Kinesis has acknowledged every one. Records that
// failed with a code time heals (throttling, an internal failure) are
// retried until ctx is done; one failed with any other code fails
// Quarantine, and so the batch, at once: a dead-letter write is not tried
// again by an output's retries (see sink/kinesis's Write).
func (s *Stream) Quarantine(ctx context.Context, ls []stream.DeadLetter) error {
	if len(ls) == 0 {
		return nil
	}
	bt, out := ls[0].Time, ls[0].Output
	limit := s.cfg.MaxRecordBytes
	if limit == 0 {
		limit = 1 << 20
	}
	fitted := make([]stream.DeadLetter, len(ls))
	for i, l := range ls {
		if l.Time != bt || l.Output != out {
			return fmt.Errorf("deadletter stream %s: letters of batch %v output %d and batch %v output %d in one call: quarantine each batch and output apart", s.cfg.Stream, bt, out, l.Time, l.Output)
		}
		f, cut, err := letters.Fit(l, limit-tagRoom)
		if err != nil {
			return fmt.Errorf("deadletter stream %s: %w", s.cfg.Stream, err)
		}
		if cut {
			s.logger.Warn("dead letter cut to fit a Kinesis record (its Range and Offset say where its record was read)",
				"stream", s.cfg.Stream, "batch", bt, "letter", letters.ID(l), "limit", limit-tagRoom)
		}
		fitted[i] = f
	}
	k, err := s.sink(ctx, out, fingerprint(ls))
	if err != nil {
		return fmt.Errorf("deadletter stream: %w", err)
	}
	if err := k.Write(ctx, batch.New(bt, nil, fitted)); err != nil {
		return fmt.Errorf("deadletter stream %s: %w", s.cfg.Stream, err)
	}
	return nil
}
