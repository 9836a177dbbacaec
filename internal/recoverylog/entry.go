package recoverylog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/recovery"
)

// Version is the newest version of the entry encoding this package writes
// and reads. An entry is written with the oldest version that holds it:
// version 1 unless it records reserved batch times (KindBatchesReserved, or
// a summary carrying them), which are version 2, or a block allocated to its
// batch as it is stored (Entry.Batch), which is version 3, or a run of empty
// batches (KindEmptyRun) or reserved times that say the batches before them
// completed (Entry.From), which are version 4. DecodeEntry reads them all and
// refuses any other, so a log written by a newer weir is never misread by an
// older one: a weir that reads only version 1 refuses a log holding reserved
// batch times rather than forget them, one that reads up to version 2 a
// block whose allocation it would miss, and one that reads up to version 3
// empty batches whose state it would not rebuild.
const Version = 4

// ErrInvalidEntry is wrapped by the errors of EncodeEntry, DecodeEntry and
// Log.Append for an entry that is malformed: an unknown kind, a missing field, a
// bad sequence range.
var ErrInvalidEntry = errors.New("recovery: invalid entry")

// ErrNewerVersion is wrapped, beside ErrInvalidEntry, by the error of
// DecodeEntry and DecodeEntries for an entry of a version after Version:
// the log was written by a newer weir (a rollback), and is not damaged.
// Only that weir, or a later one, can replay it: deleting it would drop
// its pending batches.
var ErrNewerVersion = errors.New("written by a newer weir")

// Kind tells what an Entry records.
type Kind string

// The kinds of entries. Their string values are what the encoding stores.
const (
	// KindBlockStored records a block in the block store: Entry.Block,
	// and, if Entry.Batch is not 0, that the block is in the batch at that
	// time (see BlockStoredIn).
	KindBlockStored Kind = "block"
	// KindBatchAllocated records the blocks of a batch, before its jobs run:
	// Entry.Time and Entry.Blocks.
	KindBatchAllocated Kind = "alloc"
	// KindBatchCompleted records that every output of the batch at Entry.Time
	// succeeded.
	KindBatchCompleted Kind = "complete"
	// KindShape records the pipeline's sources and outputs: Entry.Shape.
	KindShape Kind = "shape"
	// KindSummary carries the progress of entries that compaction dropped:
	// Entry.Summary. Only compaction writes it.
	KindSummary Kind = "summary"
	// KindSnapshot records that the state of the pipeline's stateful
	// operators after the batch at Entry.Time is the snapshot Entry.Ref
	// names (see recovery.SnapshotStore): Entry.Time and Entry.Ref.
	KindSnapshot Kind = "snapshot"
	// KindShardFinished records that a shard is finished for good and known
	// to be so outside the log: Entry.Shard. See ShardFinished.
	KindShardFinished Kind = "finished"
	// KindBatchesReserved records that batch times up to Entry.Time may be
	// used by batches the log holds no entry of (empty batches, see
	// BatchesReserved).
	KindBatchesReserved Kind = "reserved"
	// KindEmptyRun records a run of empty batches of a stateful pipeline:
	// Entry.Time, Entry.Through and Entry.Every (see EmptyRun).
	KindEmptyRun Kind = "empty"
)

// Entry is one record of the metadata log. Kind tells which of the other
// fields are set; the others are zero. Build entries with BlockStored,
// BatchAllocated, BatchCompleted and ShapeRecorded.
type Entry struct {
	// Kind tells what the entry records.
	Kind Kind
	// Block is the stored block (KindBlockStored).
	Block batch.BlockInfo
	// Batch is, if not 0, the time of the batch the stored block is in
	// (KindBlockStored; see BlockStoredIn).
	Batch batch.Time
	// Time is the batch time (KindBatchAllocated, KindBatchCompleted,
	// KindSnapshot), the last reserved one (KindBatchesReserved), or the
	// first of a run (KindEmptyRun).
	Time batch.Time
	// Through is the last time a run of empty batches may reach
	// (KindEmptyRun).
	Through batch.Time
	// Every is the interval between the batches of a run (KindEmptyRun): a
	// positive whole number of milliseconds.
	Every time.Duration
	// From is, if not 0, the batch at which reserved times were logged
	// (KindBatchesReserved; see BatchesReservedFrom): every batch before it
	// completed.
	From batch.Time
	// Blocks are the IDs of the batch's blocks, in batch order
	// (KindBatchAllocated).
	Blocks []batch.BlockID
	// Shape is the pipeline shape (KindShape).
	Shape recovery.Shape
	// Summary is the progress compaction kept (KindSummary).
	Summary Progress
	// Ref names a state snapshot in the log's recovery.SnapshotStore (KindSnapshot);
	// "" for the empty state.
	Ref string
	// Shard is the finished shard (KindShardFinished).
	Shard ShardKey
}

// BlockStored returns the entry recording that a block is in the block store.
// The driver appends it before anything else learns of the block.
func BlockStored(info batch.BlockInfo) Entry {
	return Entry{Kind: KindBlockStored, Block: info}
}

// BlockStoredIn returns the entry recording that a block is in the block
// store and in the batch at t: the driver's usual entry of a block. It
// appends it before anything else learns of the block, and before the batch
// at t is cut: a batch holds every block logged with its time, in ID order
// (with those of a BatchAllocated of it, if any), so a batch whose blocks
// were all logged so needs no BatchAllocated, and is pending from its first
// block's entry on. A t of 0 is BlockStored's entry.
func BlockStoredIn(info batch.BlockInfo, t batch.Time) Entry {
	return Entry{Kind: KindBlockStored, Block: info, Batch: t}
}

// BatchAllocated returns the entry recording that the batch at t holds the
// given blocks, in that order. The driver appends it before the batch's jobs
// run, so a restart recomputes the batch with exactly the same blocks.
func BatchAllocated(t batch.Time, blocks ...batch.BlockID) Entry {
	return Entry{Kind: KindBatchAllocated, Time: t, Blocks: blocks}
}

// BatchCompleted returns the entry recording that every output of the batch
// at t succeeded.
func BatchCompleted(t batch.Time) Entry {
	return Entry{Kind: KindBatchCompleted, Time: t}
}

// BatchesReserved returns the entry recording that batch times up to
// through may be used by batches that the log holds no entry of: the empty
// batches of a pipeline without stateful operators, which the driver does
// not log one by one. It appends the entry before the first such batch past
// the previous reservation runs its outputs, reserving some seconds ahead,
// so that an idle pipeline writes one entry every few seconds rather than
// two per batch, and a restart, which cuts its batches after every reserved
// time (State.LastBatch), never gives an output a batch time it saw before.
func BatchesReserved(through batch.Time) Entry {
	return Entry{Kind: KindBatchesReserved, Time: through}
}

// BatchesReservedFrom is BatchesReserved for the batch runner of a stateful
// pipeline, which logs the times reserved at the empty batch at from,
// before it runs, after every batch before from completed: the entry says
// so, completing the batches of earlier runs of empty batches (EmptyRun),
// which a restart would otherwise run again however long ago they ran.
func BatchesReservedFrom(from, through batch.Time) Entry {
	return Entry{Kind: KindBatchesReserved, Time: through, From: from}
}

// EmptyRun returns the entry recording that the batch times from, from+every,
// ... up to through are batches of a stateful pipeline that hold no block,
// unless another entry gives one a block, and that every batch before from
// completed. The driver of a stateful pipeline appends it before the first
// empty batch past the previous run ticks its stateful operators (which an
// empty batch may move: a window slides, a key times out, an update runs),
// reaching some seconds ahead, instead of an allocation and a completion per
// empty batch. The run's batches are completed when a later entry says so:
// a completion or snapshot at a later time, or a run starting later. A
// restart replays those completed after the current snapshot for the state,
// in time order with the batches holding blocks, and runs the others again,
// outputs included, as it runs the pending batches (State.Pending): the one
// a crash interrupted is among them. Its times are reserved, as
// BatchesReserved's.
func EmptyRun(from, through batch.Time, every time.Duration) Entry {
	return Entry{Kind: KindEmptyRun, Time: from, Through: through, Every: every}
}

// SnapshotTaken returns the entry recording that the state after the batch
// at t is the snapshot ref names in the log's SnapshotStore, or the empty
// state if ref is "". From then on, a restart loads that snapshot and
// recomputes only the batches after t to rebuild the state, so the log keeps
// the completed batches after t, with their blocks, until a later snapshot.
func SnapshotTaken(t batch.Time, ref string) Entry {
	return Entry{Kind: KindSnapshot, Time: t, Ref: ref}
}

// ShardFinished returns the entry recording that a shard was read to its
// end, that every record of it is in a completed batch, and that its end is
// recorded where a restarted reader finds it (a SHARD_END checkpoint in the
// lease table; without one, Kinesis no longer listing the shard, or a
// child of it holding a position in the log), so no reader will start on
// it again. From then on the log
// forgets the shard's greatest sequence number (State.ShardSeqs), which
// only told a restarted reader of the shard where to resume: the summary
// compaction keeps does not grow with every shard a resharded stream ever
// had.
func ShardFinished(stream, shard string) Entry {
	return Entry{Kind: KindShardFinished, Shard: ShardKey{Stream: stream, Shard: shard}}
}

// ShapeRecorded returns the entry recording the pipeline's shape. The driver
// appends it on the first start with a log; later starts compare the
// recorded shape with theirs (CheckShape).
func ShapeRecorded(s recovery.Shape) Entry {
	return Entry{Kind: KindShape, Shape: s}
}

// String describes e briefly, for logs and error messages, for example
// "alloc 1700000000000 ms (2023-11-14T22:13:20Z) [block-0-3 block-0-4]".
func (e Entry) String() string {
	switch e.Kind {
	case KindBlockStored:
		s := "block " + e.Block.ID.String() + " (" + strconv.Itoa(len(e.Block.Ranges)) +
			" ranges, " + strconv.Itoa(e.Block.Count) + " records)"
		if e.Batch != 0 {
			s += " in batch " + e.Batch.String()
		}
		return s
	case KindBatchAllocated:
		return fmt.Sprintf("alloc %v %v", e.Time, e.Blocks)
	case KindBatchCompleted:
		return "complete " + e.Time.String()
	case KindShape:
		return "shape " + e.Shape.String()
	case KindSummary:
		return "summary"
	case KindSnapshot:
		return fmt.Sprintf("snapshot %v %q", e.Time, e.Ref)
	case KindShardFinished:
		return "finished " + e.Shard.Stream + "/" + e.Shard.Shard
	case KindBatchesReserved:
		if e.From != 0 {
			return "reserved from " + e.From.String() + " through " + e.Time.String()
		}
		return "reserved through " + e.Time.String()
	case KindEmptyRun:
		return fmt.Sprintf("empty %v through %v every %v", e.Time, e.Through, e.Every)
	}
	return "entry of kind " + strconv.Quote(string(e.Kind))
}

// Validate reports whether e is well formed: a known kind, and the fields of
// that kind valid (sequence ranges, no duplicate block in a batch, named
// shape components). It does not check e against the rest of the log; see
// Recover for that.
func (e Entry) Validate() error {
	var err error
	switch e.Kind {
	case KindBlockStored:
		err = validateBlock(e.Block)
	case KindBatchAllocated:
		err = validateAlloc(e.Blocks)
	case KindBatchCompleted:
	case KindShape:
		err = validateShape(e.Shape)
	case KindSummary:
		err = e.Summary.validate()
	case KindSnapshot:
	case KindBatchesReserved:
		if e.From < 0 || e.From > e.Time {
			err = fmt.Errorf("from %v: must be 0 or a batch time not after through, %v", e.From, e.Time)
		}
	case KindEmptyRun:
		err = validateRun(e.Time, e.Through, e.Every)
	case KindShardFinished:
		if e.Shard.Stream == "" || e.Shard.Shard == "" {
			err = errors.New("empty stream or shard")
		}
	default:
		err = fmt.Errorf("unknown kind %q", e.Kind)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidEntry, e, err)
	}
	return nil
}

func validateBlock(b batch.BlockInfo) error {
	if b.ID.Source < 0 {
		return fmt.Errorf("source index %d: must be >= 0", b.ID.Source)
	}
	if b.Count < 0 {
		return fmt.Errorf("count %d: must be >= 0", b.Count)
	}
	for _, r := range b.Ranges {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// maxRunBatches bounds the batches of a run of empty batches: a driver
// writes runs of some seconds (10,001 batches at most, of 1 ms), so a run
// of more comes from a damaged log, which is refused rather than made into
// that many batches.
const maxRunBatches = 100_000

func validateRun(from, through batch.Time, every time.Duration) error {
	switch {
	case from <= 0:
		return fmt.Errorf("first batch time %d: must be > 0", from)
	case through < from:
		return fmt.Errorf("through %v before the first batch %v", through, from)
	case every < time.Millisecond || every%time.Millisecond != 0:
		return fmt.Errorf("interval %v: must be a positive whole number of milliseconds", every)
	case int64(through) > math.MaxInt64-every.Milliseconds():
		// Its batch times, an interval apart, would wrap around past it.
		return fmt.Errorf("through %d: the batch an interval (%v) after it would be past the greatest batch time", through, every)
	case int64(through-from)/every.Milliseconds() >= maxRunBatches:
		return fmt.Errorf("%d batches from %v through %v every %v: a run holds fewer than %d",
			int64(through-from)/every.Milliseconds()+1, from, through, every, maxRunBatches)
	}
	return nil
}

func validateAlloc(ids []batch.BlockID) error {
	seen := make(map[batch.BlockID]bool, len(ids))
	for _, id := range ids {
		if id.Source < 0 {
			return fmt.Errorf("%v: source index must be >= 0", id)
		}
		if seen[id] {
			return fmt.Errorf("%v appears twice", id)
		}
		seen[id] = true
	}
	return nil
}

// wireEntry is the JSON form of an Entry: a version, a kind tag, and only the
// fields of that kind.
type wireEntry struct {
	V       int              `json:"v"`
	Kind    Kind             `json:"kind"`
	Block   *batch.BlockInfo `json:"block,omitempty"`
	Batch   *batch.Time      `json:"batch,omitempty"`
	Time    *batch.Time      `json:"time,omitempty"`
	Through *batch.Time      `json:"through,omitempty"`
	Every   *int64           `json:"every,omitempty"` // milliseconds
	From    *batch.Time      `json:"from,omitempty"`
	Blocks  []batch.BlockID  `json:"blocks,omitempty"`
	Shape   *recovery.Shape  `json:"shape,omitempty"`
	Summary *wireSummary     `json:"summary,omitempty"`
	Ref     string           `json:"ref,omitempty"`
	Shard   *wireShard       `json:"shard,omitempty"`
}

// wireShard is the JSON form of a ShardKey.
type wireShard struct {
	Stream string `json:"stream"`
	Shard  string `json:"shard"`
}

// EncodeEntry returns the encoding of e: one line of JSON (without the
// newline) holding the version, the kind and that kind's fields, for example
// {"v":1,"kind":"complete","time":1700000000000}: version 1 unless the entry
// records reserved batch times, a block's batch or a run of empty batches
// (see Version). It refuses an entry that does not Validate.
func EncodeEntry(e Entry) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	w := wireEntry{V: 1, Kind: e.Kind}
	if e.Kind == KindBatchesReserved || (e.Kind == KindSummary && e.Summary.ReservedThrough != 0) {
		w.V = 2
	}
	switch e.Kind {
	case KindBlockStored:
		w.Block = &e.Block
		if e.Batch != 0 {
			w.V, w.Batch = 3, &e.Batch
		}
	case KindBatchAllocated:
		w.Time, w.Blocks = &e.Time, e.Blocks
	case KindBatchCompleted:
		w.Time = &e.Time
	case KindShape:
		w.Shape = &e.Shape
	case KindSummary:
		w.Summary = e.Summary.wire()
	case KindSnapshot:
		w.Time, w.Ref = &e.Time, e.Ref
	case KindBatchesReserved:
		w.Time = &e.Time
		if e.From != 0 {
			w.V, w.From = 4, &e.From
		}
	case KindEmptyRun:
		every := e.Every.Milliseconds()
		w.V, w.Time, w.Through, w.Every = 4, &e.Time, &e.Through, &every
	case KindShardFinished:
		w.Shard = &wireShard{Stream: e.Shard.Stream, Shard: e.Shard.Shard}
	}
	return json.Marshal(w)
}

// DecodeEntry decodes an entry EncodeEntry encoded, of version 1 to 4. It
// refuses another version, what a later version added in an earlier
// version's entry, an unknown kind, a missing field and an entry that does
// not Validate, with an error wrapping ErrInvalidEntry, and for a version
// after Version ErrNewerVersion too. It never panics.
func DecodeEntry(b []byte) (Entry, error) {
	var w wireEntry
	if err := json.Unmarshal(b, &w); err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrInvalidEntry, err)
	}
	if w.V > Version {
		return Entry{}, fmt.Errorf("%w: version %d, this weir reads versions 1 to %d: %w; run that weir, or a later one, on the log",
			ErrInvalidEntry, w.V, Version, ErrNewerVersion)
	}
	if w.V < 1 {
		return Entry{}, fmt.Errorf("%w: version %d, this weir reads versions 1 to %d", ErrInvalidEntry, w.V, Version)
	}
	if w.V == 1 && (w.Kind == KindBatchesReserved || (w.Summary != nil && w.Summary.Reserved != nil)) {
		return Entry{}, fmt.Errorf("%w: kind %q: reserved batch times in a version-1 entry", ErrInvalidEntry, w.Kind)
	}
	if w.V < 3 && w.Batch != nil {
		return Entry{}, fmt.Errorf("%w: kind %q: a block's batch in a version-%d entry", ErrInvalidEntry, w.Kind, w.V)
	}
	if w.V < 4 && (w.Kind == KindEmptyRun || w.Through != nil || w.Every != nil || w.From != nil) {
		return Entry{}, fmt.Errorf("%w: kind %q: a run of empty batches, or reserved times' start, in a version-%d entry", ErrInvalidEntry, w.Kind, w.V)
	}
	e, err := w.entry()
	if err != nil {
		return Entry{}, fmt.Errorf("%w: kind %q: %w", ErrInvalidEntry, w.Kind, err)
	}
	if err := e.Validate(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

func (w wireEntry) entry() (Entry, error) {
	e := Entry{Kind: w.Kind}
	missing := func(field string) (Entry, error) { return Entry{}, fmt.Errorf("missing %q", field) }
	switch w.Kind {
	case KindBlockStored:
		if w.Block == nil {
			return missing("block")
		}
		e.Block = *w.Block
		if w.Batch != nil {
			if *w.Batch == 0 {
				return Entry{}, errors.New(`"batch" 0: a block's batch time is not 0`)
			}
			e.Batch = *w.Batch
		}
	case KindBatchAllocated:
		if w.Time == nil {
			return missing("time")
		}
		e.Time, e.Blocks = *w.Time, w.Blocks
	case KindBatchCompleted, KindBatchesReserved:
		if w.Time == nil {
			return missing("time")
		}
		e.Time = *w.Time
		if w.From != nil {
			if w.Kind != KindBatchesReserved || *w.From == 0 {
				return Entry{}, errors.New(`"from" in an entry that is not of reserved times, or 0`)
			}
			e.From = *w.From
		}
	case KindShape:
		if w.Shape == nil {
			return missing("shape")
		}
		e.Shape = *w.Shape
	case KindSummary:
		if w.Summary == nil {
			return missing("summary")
		}
		e.Summary = w.Summary.summary()
	case KindSnapshot:
		if w.Time == nil {
			return missing("time")
		}
		e.Time, e.Ref = *w.Time, w.Ref
	case KindEmptyRun:
		switch {
		case w.Time == nil:
			return missing("time")
		case w.Through == nil:
			return missing("through")
		case w.Every == nil:
			return missing("every")
		case *w.Every <= 0 || *w.Every > int64(math.MaxInt64/time.Millisecond):
			return Entry{}, fmt.Errorf(`"every" %d: must be a positive number of milliseconds`, *w.Every)
		}
		e.Time, e.Through, e.Every = *w.Time, *w.Through, time.Duration(*w.Every)*time.Millisecond
	case KindShardFinished:
		if w.Shard == nil {
			return missing("shard")
		}
		e.Shard = ShardKey{Stream: w.Shard.Stream, Shard: w.Shard.Shard}
	}
	return e, nil
}

// DecodeEntries decodes records EncodeEntry encoded. The error of a record
// that does not decode is a *recovery.CorruptError with Path "recovery log"
// and Offset its index, but for a record of a newer version (ErrNewerVersion),
// which is not damage: its error names the record and says which weir reads
// it, rather than advise deleting the log.
func DecodeEntries(records [][]byte) ([]Entry, error) {
	out := make([]Entry, len(records))
	for i, p := range records {
		e, err := DecodeEntry(p)
		if errors.Is(err, ErrNewerVersion) {
			return nil, fmt.Errorf("recovery: recovery log entries[%d]: %w (the log is not damaged: keep it)", i, err)
		}
		if err != nil {
			return nil, &recovery.CorruptError{Path: "recovery log", Offset: int64(i), Err: err}
		}
		out[i] = e
	}
	return out, nil
}

// EncodeEntries encodes entries, refusing all of them if one is invalid.
func EncodeEntries(entries []Entry) ([][]byte, error) {
	out := make([][]byte, len(entries))
	for i, e := range entries {
		b, err := EncodeEntry(e)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}
