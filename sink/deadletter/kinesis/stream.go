package kinesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/letters"
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
// "<Origin>/<output>" (one writer per output, since the letters of two
// outputs share batch times and indexes; on a fleet, followed by "/" and
// the worker's name, see sink/kinesis's Config.Worker; without a recovery
// log, whose batch times may repeat an earlier Run's, by "/" and a random
// name of the pipeline's Run, see its Config.Origin), batch time and
// Index. A letter
// whose JSON, key and tag would not fit Config.MaxRecordBytes is cut
// first: its stack, then its record, then its panic and error, each to a
// prefix with a marker, a cut record's encoding prefixed "truncated:" so
// that it is not taken for the record (weir deadletters replay refuses
// it); each cut is logged at WARN. Its Range and Offset still name the
// source record.
//
// A Kinesis stream cannot replace records: a batch recomputed after a
// crash, or a Quarantine retried after an error, writes its letters
// again, with the same tags. The stream then holds a copy per attempt: at
// least once as records, exactly once for a weir pipeline that reads it
// with the origin filter (DESIGN.md, "Writing to Kinesis"), which keeps
// the first copy of each letter. A Stream is safe for concurrent use and
// holds no resource to close (the client is the caller's).
type Stream struct {
	cfg    sinkkinesis.Config[stream.DeadLetter]
	logger *slog.Logger

	mu    sync.Mutex
	sinks map[int]*sinkkinesis.Sink[stream.DeadLetter] // by output
}

var _ stream.DeadLetters = (*Stream)(nil)

// New returns a Stream writing to cfg.Stream, configured as the sink of
// package sink/kinesis is, or an error wrapping sinkkinesis.ErrInvalidConfig
// that names every bad field. Record must be nil (the Stream encodes
// letters), Origin is required: it must stay the same across the
// pipeline's restarts and differ from every other writer of the stream,
// and leave room for "/<output>" within the sink's limit. MaxRecordBytes,
// if set, must be at least 4 KiB. Aggregate may be set (a consumer must
// then de-aggregate).
func New(cfg sinkkinesis.Config[stream.DeadLetter]) (*Stream, error) {
	var problems []error
	if cfg.Record != nil {
		problems = append(problems, errors.New("Record set: leave it nil, the dead-letter stream writes each letter's JSON"))
	}
	if cfg.Origin == "" {
		problems = append(problems, errors.New("Origin empty: name the pipeline writing the letters, so that their copies can be told apart"))
	}
	if cfg.MaxRecordBytes != 0 && cfg.MaxRecordBytes < minRecordBytes {
		problems = append(problems, fmt.Errorf("MaxRecordBytes %d: a letter needs at least %d bytes (its fields, cut, and its tag): raise it, or leave it 0 for 1 MiB", cfg.MaxRecordBytes, minRecordBytes))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %w", sinkkinesis.ErrInvalidConfig, errors.Join(problems...))
	}
	cfg.Record = record
	s := &Stream{cfg: cfg, logger: cfg.Logger, sinks: map[int]*sinkkinesis.Sink[stream.DeadLetter]{}}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if _, err := s.sink(999); err != nil { // the longest writer name of an output index of 3 digits
		return nil, err
	}
	return s, nil
}

// sink returns the sink of the letters of output o.
func (s *Stream) sink(o int) (*sinkkinesis.Sink[stream.DeadLetter], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.sinks[o]; k != nil {
		return k, nil
	}
	cfg := s.cfg
	cfg.Origin += "/" + strconv.Itoa(o)
	k, err := sinkkinesis.New(cfg)
	if err != nil {
		return nil, err
	}
	s.sinks[o] = k
	return k, nil
}

// record returns the partition key and data of letter l.
func record(l stream.DeadLetter) (string, []byte) {
	data, _ := json.Marshal(l) // no error: Quarantine's letters.Fit marshaled l
	return letters.ID(l), data
}

// Quarantine writes letters, all of one batch and output, one record each,
// and returns nil once Kinesis has acknowledged every one. Failed records
// are retried until ctx is done (see sink/kinesis's Write).
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
			s.logger.Warn("dead letter cut to fit a Kinesis record (its Range and Offset name the source record)",
				"stream", s.cfg.Stream, "batch", bt, "letter", letters.ID(l), "limit", limit-tagRoom)
		}
		fitted[i] = f
	}
	k, err := s.sink(out)
	if err != nil {
		return fmt.Errorf("deadletter stream: %w", err)
	}
	if err := k.Write(ctx, batch.New(bt, nil, fitted)); err != nil {
		return fmt.Errorf("deadletter stream %s: %w", s.cfg.Stream, err)
	}
	return nil
}
