package stream

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"runtime"
	"slices"
	"time"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/source"
)

// ErrInvalidConfig is wrapped by the error NewPipeline returns for a bad
// Config, and by the error Run returns for a bad pipeline (a window whose
// length is not a multiple of the batch interval, a nil function, an output
// missing). The message names every bad field and how to fix it.
var ErrInvalidConfig = errors.New("stream: invalid config")

// Defaults of the Config fields whose zero value means "use the default".
const (
	// DefaultBatchInterval is the batch interval used when
	// Config.BatchInterval is zero.
	DefaultBatchInterval = time.Second
	// DefaultBlockInterval is the block interval used when
	// Config.BlockInterval is zero, unless the batch interval is shorter.
	DefaultBlockInterval = 200 * time.Millisecond
	// DefaultCompactEvery is the default of Config.CompactEvery.
	DefaultCompactEvery = 100
	// DefaultDrainTimeout is the default of Config.DrainTimeout.
	DefaultDrainTimeout = 30 * time.Second
	// DefaultStateSnapshotBatches is the default of
	// Config.StateSnapshotInterval, in batch intervals: a state snapshot
	// every 10 batches.
	DefaultStateSnapshotBatches = 10
)

// The driver's internal flow bounds, behind the one setting a user makes,
// MaxBufferedBytes (DESIGN.md, "Memory and flow control").
const (
	// minBufferedBytes is the least MaxBufferedBytes accepted: 1 MiB, the
	// largest Kinesis record by default. Less is most likely a size meant
	// in MiB, and would read one page at a time.
	minBufferedBytes = 1 << 20
	// defaultMaxPendingBatches bounds the batches cut and waiting for the
	// one running. When that many wait, the batch timer waits too: no
	// batch time is ever skipped, the late batches are cut in order once
	// room frees (their scheduling delay grows), and meanwhile blocks pile
	// up unbatched until maxUnbatchedBlocks makes pushes wait.
	defaultMaxPendingBatches = 10
	// minUnbatchedBlocks is the least bound on a source's blocks stored
	// and not yet cut into a batch: a push waits while its source has
	// that many (the default is twice the blocks of a batch interval, at
	// least this). So a source holds at most
	// (maxPendingBatches+3)*maxUnbatchedBlocks stored blocks: those of the
	// batch running, of the pending ones, of the one the timer holds, and
	// the unbatched ones; their bytes are bounded by MaxBufferedBytes.
	minUnbatchedBlocks = 10
	// maxParallelism is the most Config.Parallelism accepted: far more
	// tasks than a machine has cores, or shards a worker reads.
	maxParallelism = 10000
)

// Config configures a Pipeline. The zero value of every field means its
// documented default, so Config{} is a valid configuration.
type Config struct {
	// BatchInterval is how often a batch is cut from the stored blocks.
	// Batch times are the multiples of BatchInterval since the Unix epoch,
	// so it must be a whole number of milliseconds. Default: 1s.
	BatchInterval time.Duration

	// BlockInterval is how often a receiver's block generator seals a block
	// (passed to receivers in source.Runtime). It must be at least 1ms and
	// <= BatchInterval. Default: 200ms, or BatchInterval if that is shorter.
	BlockInterval time.Duration

	// Clock is the time source for the batch timer and is handed to
	// receivers. Default: clock.Real{} (which runs in virtual time inside a
	// testing/synctest bubble).
	Clock clock.Clock

	// Logger receives the driver's logs, with the key "source" added for a
	// receiver's. Default: slog.Default(), so a stall or a failure is seen
	// without configuration; pass slog.New(slog.DiscardHandler) for silence.
	Logger *slog.Logger

	// MaxBufferedBytes is the memory, in bytes, the pipeline may hold in
	// records read and not yet processed: from a receiver's read through
	// its block queue, the stored blocks waiting for a batch, the batches
	// waiting and the one running, until every output of their batch
	// succeeded. It is the one memory setting: see "Memory and flow
	// control" in DESIGN.md for what it bounds, how, and what it does not.
	// Each source's receiver gets an equal share
	// (source.Runtime.MaxBufferedBytes) and pauses reading while its
	// records hold it; nothing is dropped, and a receiver holding nothing
	// still reads one page, however large. -1 means no limit. Default:
	// 64 MiB (source.DefaultMaxBufferedBytes). At least 1 MiB, the largest
	// Kinesis record by default.
	MaxBufferedBytes int64

	// maxUnbatchedBlocks and maxPendingBatches are the driver's block and
	// batch bounds (see "Memory and flow control" in DESIGN.md); zero
	// means their defaults. Only tests set them.
	maxUnbatchedBlocks int
	maxPendingBatches  int

	// Listeners are told about batches and receivers; see Listener.
	// Default: none.
	Listeners []Listener

	// Stdout is where Print writes. Default: os.Stdout.
	Stdout io.Writer

	// Recovery opens the recovery log (see the Recovery section of the
	// package documentation): where the driver records every stored block,
	// every batch allocation and every completion, so that a restarted
	// pipeline recomputes exactly the batches a crash interrupted, with the
	// same times and blocks. recovery.Dir("state") keeps it in a local
	// directory; a DynamoDB log (package recovery/dynamolog) keeps it in a
	// table, so that the worker can be restarted on any machine with the
	// same log. Every batch with records appends its blocks and a
	// completion; an idle pipeline appends one entry per 10 s, and with
	// state a snapshot at most once in 20 minutes (DESIGN.md, Recovery).
	// Default: nil, no log: a restart recomputes nothing and
	// re-reads from the receivers' checkpoints, which never pass a record
	// that is not in a completed batch.
	Recovery recovery.Opener

	// CompactEvery is how many completed batches pass between two
	// compactions of the recovery log, which drop what completed batches
	// no longer need; in a pipeline with state, the compaction then waits
	// for the next state snapshot (see StateSnapshotInterval), for up to
	// as many batches again. Ignored without Recovery. Default: 100.
	CompactEvery int

	// Parallelism is the number of tasks of a batch that run at once: the
	// partitions of a chain of narrow operators, the map and reduce tasks
	// of a keyed operator, the calls of ForEach and ForEachPartition (see
	// the Execution section of the package documentation). It is also the
	// number of hash partitions of a keyed operator. 1 runs every task in
	// the driver's goroutine, one after the other. At most 10000. Default:
	// runtime.GOMAXPROCS(0) when NewPipeline is called.
	Parallelism int

	// DrainTimeout bounds the drain Run starts when its ctx is done: the
	// receivers' graceful Stop (handing leases back, final checkpoints) and
	// the batches of what they stored. Past it, Run stops now, as Stop
	// does, and returns a *DrainError wrapping ErrDrainTimeout that says
	// what was left; the receivers' Stop calls are cancelled, so a hung
	// call (DynamoDB, Kinesis) cannot hold the shutdown. It does not bound
	// Drain, which its own ctx bounds. It also bounds how long Run, once
	// it has stopped, waits for a Listener to take the last events (see
	// Listener). Default: 30s.
	DrainTimeout time.Duration

	// AllowSplitState runs stateful operators (UpdateStateByKey,
	// MapWithState, Window, ReduceByKeyAndWindow) on the records of a
	// source that shares its shards with other workers (a Kinesis receiver
	// with Config.Leases) even when they are not declared partitioned by
	// key (PartitionedByKey), which Run otherwise refuses (ErrSplitState).
	// The risk it accepts: state is per worker. Each worker keeps the state
	// of the records it read, so a key whose records come from shards held
	// by several workers has a partial state on each, and a shard whose
	// lease moves leaves its keys' history with the worker that read it
	// before (DESIGN.md, "State per worker"). Set it for a fleet of one
	// worker, or when the outputs combine the workers' partial states
	// themselves (sums written as additive updates). Default: false.
	AllowSplitState bool

	// StateSnapshotInterval is how often, in batch time, the state of
	// the stateful operators (UpdateStateByKey, MapWithState, Window,
	// ReduceByKeyAndWindow) is snapshotted beside the recovery log (what
	// Spark calls a state checkpoint; a checkpoint in weir is only a
	// shard's position in the lease table, every
	// leasetable.Config.CheckpointInterval): after
	// the first batch completed at least this long after the current
	// snapshot. A restart loads the last snapshot and recomputes the
	// batches completed after it from their logged ranges, so the state is
	// exactly that of a run never interrupted; the log keeps those batches
	// until the next snapshot. A Run whose drain completes every batch
	// also snapshots the state after its last one, so that its restart
	// replays nothing. A shorter interval means a shorter replay after a
	// crash and more snapshot writes (each the whole state, written and
	// fsynced between two batches). Ignored without Recovery or stateful
	// operators. It must be >= BatchInterval. Default: 10 batch intervals.
	StateSnapshotInterval time.Duration
}

// withDefaults returns cfg with every zero field set to its default. It
// assumes cfg is valid.
func (cfg Config) withDefaults() Config {
	if cfg.BatchInterval == 0 {
		cfg.BatchInterval = DefaultBatchInterval
	}
	if cfg.BlockInterval == 0 {
		cfg.BlockInterval = min(DefaultBlockInterval, cfg.BatchInterval)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBufferedBytes == 0 {
		cfg.MaxBufferedBytes = source.DefaultMaxBufferedBytes
	}
	if cfg.maxUnbatchedBlocks == 0 {
		perBatch := int((cfg.BatchInterval + cfg.BlockInterval - 1) / cfg.BlockInterval)
		cfg.maxUnbatchedBlocks = max(2*perBatch, minUnbatchedBlocks)
	}
	if cfg.maxPendingBatches == 0 {
		cfg.maxPendingBatches = defaultMaxPendingBatches
	}
	if cfg.CompactEvery == 0 {
		cfg.CompactEvery = DefaultCompactEvery
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.StateSnapshotInterval == 0 {
		cfg.StateSnapshotInterval = DefaultStateSnapshotBatches * cfg.BatchInterval
	}
	if cfg.Parallelism == 0 {
		cfg.Parallelism = runtime.GOMAXPROCS(0)
	}
	cfg.Listeners = slices.Clone(cfg.Listeners)
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	return cfg
}

// validate reports every problem of cfg together, each naming the field, its
// value and the fix, wrapped in ErrInvalidConfig.
func (cfg Config) validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }

	batchIv := cfg.BatchInterval
	switch {
	case batchIv < 0:
		add("BatchInterval %v: must be > 0 (or 0 for the default, %v)", batchIv, DefaultBatchInterval)
		batchIv = 0
	case batchIv%time.Millisecond != 0:
		add("BatchInterval %v: must be a whole number of milliseconds, such as %v", batchIv, batchIv.Truncate(time.Millisecond)+time.Millisecond)
	case batchIv == 0:
		batchIv = DefaultBatchInterval
	}
	switch {
	case cfg.BlockInterval < 0:
		add("BlockInterval %v: must be > 0 (or 0 for the default, %v)", cfg.BlockInterval, DefaultBlockInterval)
	case cfg.BlockInterval > 0 && cfg.BlockInterval < time.Millisecond:
		// Most likely milliseconds meant and nanoseconds written: a seal
		// every few hundred nanoseconds spins a core and makes a block (and,
		// with Recovery, a log entry) of nearly every record.
		add("BlockInterval %v: must be at least 1ms (or 0 for the default, %v); write a duration in milliseconds as n * time.Millisecond",
			cfg.BlockInterval, DefaultBlockInterval)
	case batchIv > 0 && cfg.BlockInterval > batchIv:
		add("BlockInterval %v: must be <= BatchInterval (%v)", cfg.BlockInterval, batchIv)
	}
	if b := cfg.MaxBufferedBytes; b < -1 || (b > 0 && b < minBufferedBytes) {
		add("MaxBufferedBytes %d: must be at least %d (1 MiB), or -1 for no limit, or 0 for the default (%d MiB); write a size in MiB as n<<20",
			b, minBufferedBytes, source.DefaultMaxBufferedBytes>>20)
	}
	// A nil pointer in an interface field is not nil: it would not get the
	// default, and the first call on it would panic in a goroutine of Run
	// (a nil *clock.Manual crashed the process).
	if nilPointer(cfg.Recovery) {
		add("Recovery is a nil %T: pass an Opener such as recovery.Dir(path), or nil for no log", cfg.Recovery)
	}
	if nilPointer(cfg.Clock) {
		add("Clock is a nil %T: pass a Clock, such as clock.NewManual(start), or nil for the wall clock", cfg.Clock)
	}
	if nilPointer(cfg.Stdout) {
		add("Stdout is a nil %T: pass an io.Writer, or nil for os.Stdout", cfg.Stdout)
	}
	if cfg.CompactEvery < 0 {
		add("CompactEvery %d: must be >= 1 (or 0 for the default, %d)", cfg.CompactEvery, DefaultCompactEvery)
	}
	switch {
	case cfg.Parallelism < 0:
		add("Parallelism %d: must be >= 1 (or 0 for the default, GOMAXPROCS)", cfg.Parallelism)
	case cfg.Parallelism > maxParallelism:
		// A keyed operator allocates, in every batch, per hash partition
		// and per task: an absurd count allocates without end in the first batch
		// instead of failing here.
		add("Parallelism %d: must be at most %d (or 0 for the default, GOMAXPROCS): it is the number of tasks run at once and of a keyed operator's hash partitions",
			cfg.Parallelism, maxParallelism)
	}
	if cfg.DrainTimeout < 0 {
		add("DrainTimeout %v: must be > 0 (or 0 for the default, %v)", cfg.DrainTimeout, DefaultDrainTimeout)
	}
	if cfg.StateSnapshotInterval != 0 && (cfg.StateSnapshotInterval < 0 || (batchIv > 0 && cfg.StateSnapshotInterval < batchIv)) {
		add("StateSnapshotInterval %v: must be >= BatchInterval (%v), or 0 for the default (%d batch intervals)",
			cfg.StateSnapshotInterval, batchIv, DefaultStateSnapshotBatches)
	}
	for i, l := range cfg.Listeners {
		switch {
		case l == nil:
			add("Listeners[%d] nil: remove it or pass a Listener", i)
		case nilPointer(l):
			add("Listeners[%d] is a nil %T: remove it or pass a Listener", i, l)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// nilPointer reports whether v holds a nil pointer.
func nilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
