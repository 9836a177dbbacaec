package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/internal/durable"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/dirlock"
	"github.com/weirstream/weir/internal/noretry"
	"github.com/weirstream/weir/internal/outputid"
	"github.com/weirstream/weir/stream"
)

// ErrInvalidConfig is wrapped by the error New returns for a Config it
// refuses; the message names every bad field and its fix.
var ErrInvalidConfig = errors.New("files: invalid config")

// ErrLocked is wrapped by the error New returns when another Sink, in this
// process or another, has the directory: two writers of one directory
// would each believe the other's files were their own batches.
var ErrLocked = errors.New("files: directory in use by another sink")

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("files: sink closed")

// ErrTimeReused is wrapped by the error Write returns for a batch whose
// time has a file holding other records: a batch of an earlier Run had
// that time, which happens without a recovery log when the wall clock
// went back (see Write). The batch is not written, and the file is kept.
var ErrTimeReused = errors.New("files: batch time already written with other records")

// Defaults of the Config fields left zero.
const (
	// DefaultPrefix starts every file name when Config.Prefix is empty.
	DefaultPrefix = "batch-"
	// DefaultSuffix ends every file name when Config.Suffix is empty.
	DefaultSuffix = ".txt"
	// DefaultPerm is the permission of the files when Config.Perm is 0:
	// 0600, the owner's only.
	DefaultPerm = durable.DefaultPerm
	// DefaultMaxAge is Config.MaxAge when it and Config.Keep are both 0:
	// the files of the last day of batch times are kept.
	DefaultMaxAge = 24 * time.Hour
)

// tempPrefix starts the names of the temporary files (see durable.TempOf):
// hidden, and never a final name, whatever Prefix is.
const tempPrefix = ".tmp-"

// lockName is the lock file in Dir, held while a Sink is open.
const lockName = ".lock"

// maxAffixes is the most bytes Prefix and Suffix may have together: a
// batch's temporary file name (durable.CreateTemp's) is its final name and
// 22 bytes more, the final name is Prefix, the 13 digits of the batch time
// and Suffix, and Linux and macOS limit a file name to 255 bytes.
const maxAffixes = 255 - 22 - 13

// Config configures a Sink of records of type T. Only Dir is required.
type Config[T any] struct {
	// Dir is the directory the files are written to, created (with its
	// parents, mode 0700: Perm plus search where read is granted) by New if
	// it does not exist. A directory belongs to one Sink at a time: New
	// locks it (a hidden ".lock" file held with flock(2) until Close or the
	// process ends), fails with ErrLocked if another Sink, in any process,
	// still has it after LockWait, and removes the temporary files a crash
	// left in it. New refuses a directory that group or others can write,
	// or that another user owns: a file they put at a batch's name would be
	// taken for that batch's output. Required.
	Dir string
	// Format returns the bytes of one record; the Sink writes a newline
	// after each. Default: fmt's %v of the record. Not with Encode, which
	// writes the records itself.
	Format func(v T) []byte
	// Encode writes a whole batch, for formats that are not one line per
	// record (a JSON array, a CSV file with a header). Default: nil, write
	// each record with Format.
	Encode func(w io.Writer, b *batch.Batch[T]) error
	// Prefix and Suffix surround the batch time in file names: a batch at
	// time 1700000000000 is written to Dir/<Prefix>1700000000000<Suffix>.
	// The time is zero-padded to 13 digits so that names sort in time
	// order. Defaults: DefaultPrefix ("batch-") and DefaultSuffix (".txt").
	// Prefix must not start with ".tmp-", which names temporary files;
	// neither may hold a path separator or a NUL byte.
	// Together they may have at most 220 bytes: with the 13 digits and the
	// 22 bytes a temporary file's name adds, that is the 255 bytes Linux
	// and macOS allow a file name.
	Prefix, Suffix string
	// Perm is the permission of the files (and the lock file), filtered by
	// the umask. It must let the owner read and write and must not let group
	// or others write. Default DefaultPerm (0600); 0644 lets others read.
	Perm fs.FileMode
	// WriteEmpty, when true, writes a file for an empty batch (no records)
	// too: an empty file, or what Encode writes for no records, so that
	// every batch time has a file. Default false: an empty batch writes
	// nothing, so an idle pipeline leaves no files.
	WriteEmpty bool
	// Keep and MaxAge are the retention: after each file it writes, Write
	// removes the files of the batches they no longer keep, the oldest
	// first, and only files of batches a restart cannot run again (see
	// Write): never the newest, nor those of the 10 s before the batch
	// preceding it, so more files than Keep may stay. It counts the batch
	// files that were in Dir at New and those written since. With both
	// zero, the default, MaxAge is DefaultMaxAge: a day of batch times, as
	// long as a Kinesis stream keeps its records by default.
	//
	// Keep, when > 0, is how many batch files are kept. Default 0: no limit
	// on the count.
	Keep int
	// MaxAge, when > 0, removes the files of batches older than the newest
	// batch's time minus MaxAge (batch times, not the clock: a pipeline
	// catching up removes nothing it still needs, and an idle one, which
	// writes nothing, removes nothing). Negative: no age limit, so with
	// Keep 0 every file is kept. Default 0: DefaultMaxAge if Keep is 0, no
	// age limit otherwise.
	MaxAge time.Duration
	// LockWait is how long New waits for another Sink that has Dir to
	// release its lock, as a predecessor that is still exiting does when it
	// dies, before failing with ErrLocked (a directory recovery log's open
	// waits the same way: recovery.DirConfig.LockWait). New blocks for as
	// long. Default DefaultLockWait (10s); negative means fail at once.
	LockWait time.Duration
	// Logger receives the warning that New is waiting for the lock.
	// Default slog.Default().
	Logger *slog.Logger
}

// DefaultLockWait is Config.LockWait's default: long enough for a process
// being stopped to exit.
const DefaultLockWait = 10 * time.Second

func (c Config[T]) withDefaults() Config[T] {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Suffix == "" {
		c.Suffix = DefaultSuffix
	}
	if c.Perm == 0 {
		c.Perm = DefaultPerm
	}
	if c.Keep == 0 && c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.Format == nil {
		c.Format = func(v T) []byte { return fmt.Appendf(nil, "%v", v) }
	}
	return c
}

func (c Config[T]) validate() error {
	var problems []error
	if c.Dir == "" {
		problems = append(problems, errors.New("Dir empty: set the directory to write the files to"))
	}
	if c.Format != nil && c.Encode != nil {
		problems = append(problems, errors.New("Format and Encode both set: Encode writes each batch and Format would be ignored; set one of them"))
	}
	for _, f := range []struct{ name, v string }{{"Prefix", c.Prefix}, {"Suffix", c.Suffix}} {
		if strings.ContainsRune(f.v, filepath.Separator) || strings.ContainsRune(f.v, '/') {
			problems = append(problems, fmt.Errorf("%s %q: must not contain a path separator; put directories in Dir", f.name, f.v))
		}
		if strings.ContainsRune(f.v, 0) {
			problems = append(problems, fmt.Errorf("%s %q: must not contain a NUL byte, which no file name holds", f.name, f.v))
		}
	}
	if d := c.withDefaults(); len(d.Prefix)+len(d.Suffix) > maxAffixes {
		problems = append(problems, fmt.Errorf("Prefix and Suffix: %d bytes together, must be at most %d: "+
			"a file's name adds the 13 digits of its batch time and its temporary name 22 bytes more, "+
			"and a file name is limited to 255 bytes; shorten them", len(d.Prefix)+len(d.Suffix), maxAffixes))
	}
	if strings.HasPrefix(c.Prefix, tempPrefix) {
		problems = append(problems, fmt.Errorf("Prefix %q: must not start with %q, which names temporary files", c.Prefix, tempPrefix))
	}
	if c.Keep < 0 {
		problems = append(problems, fmt.Errorf("Keep %d: must be >= 0 (0 keeps every file)", c.Keep))
	}
	if err := durable.CheckPerm("Perm", c.Perm); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// Sink writes batches to files, one per batch time, exactly once. Its Write
// is a stream.ForEachBatch function, of one output of a pipeline (see
// Write). A Sink is safe for concurrent use, though a pipeline calls it one
// batch at a time. It holds its directory's lock until Close.
type Sink[T any] struct {
	cfg  Config[T]
	dir  *durable.Dir
	lock *dirlock.Lock

	// owner is the output of a pipeline's Run that writes with the Sink:
	// another output of the Run, or of another Run while it runs, is
	// refused (see oneOutput).
	owner outputid.Owner

	mu sync.Mutex // guards times
	// times are the batch times of the files in Dir, sorted: those New
	// found and those Write wrote since, less those retention removed. An
	// index, so that retention does not read a directory of a day's files
	// after every batch.
	times  []batch.Time
	closed atomic.Bool
	// beforeRename, if set, is called with the temporary file's path after
	// it is written and synced and before the rename: a test hook.
	beforeRename func(tmp string) error
	// syncAfterRename, if set, is called in place of the directory sync
	// after a rename: a test hook.
	syncAfterRename func() error
}

// New returns a Sink configured by cfg, or an error wrapping
// ErrInvalidConfig that names every bad field. It creates cfg.Dir if
// needed, locks it (waiting up to cfg.LockWait, logged, for another Sink
// that has it to release it: an error wrapping ErrLocked if it still has it
// then) and removes the temporary files a crash left in it. Close releases
// the lock.
func New[T any](cfg Config[T]) (*Sink[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sink[T]{cfg: cfg.withDefaults()}
	dir, err := durable.OpenDir(s.cfg.Dir, s.cfg.Perm)
	if err != nil {
		return nil, fmt.Errorf("files: Config.Dir: %w", err)
	}
	wait := s.cfg.LockWait
	if wait == 0 {
		wait = DefaultLockWait
	}
	logger := s.cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	lock, err := dirlock.AcquireWait(context.Background(), dir, lockName, clock.Real{}, wait, func() {
		logger.Warn("files: the directory is locked by another Sink; waiting for it to exit", "dir", s.cfg.Dir, "wait", wait)
	})
	switch {
	case errors.Is(err, dirlock.ErrLocked):
		dir.Close()
		return nil, fmt.Errorf("%w: %s (another process or Sink writes there: give each its own Dir, or stop the other first)", ErrLocked, s.cfg.Dir)
	case err != nil:
		dir.Close()
		return nil, fmt.Errorf("files: %w", err)
	}
	s.dir, s.lock = dir, lock
	if err := s.removeTemps(); err != nil {
		s.Close()
		return nil, err
	}
	if s.times, err = s.Batches(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the directory's lock; Write then returns ErrClosed. It is
// idempotent.
func (s *Sink[T]) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return errors.Join(s.lock.Release(), s.dir.Close())
}

// removeTemps removes the temporary files of this Sink's names.
func (s *Sink[T]) removeTemps() error {
	entries, err := s.dir.ReadDir()
	if err != nil {
		return fmt.Errorf("files: %w", err)
	}
	for _, e := range entries {
		if s.isTemp(e.Name()) {
			if err := s.dir.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("files: remove a crash's temporary file: %w", err)
			}
		}
	}
	return nil
}

// isTemp reports whether name is one of this Sink's temporary files:
// tempPrefix, a final name, a dot and a random suffix.
func (s *Sink[T]) isTemp(name string) bool {
	final, ok := durable.TempOf(name)
	if ok {
		_, ok = s.parse(final)
	}
	return ok
}

// Name returns the file name of the batch at t, without the directory.
func (s *Sink[T]) Name(t batch.Time) string {
	return s.cfg.Prefix + fmt.Sprintf("%013d", int64(t)) + s.cfg.Suffix
}

// Path returns the path of the file of the batch at t.
func (s *Sink[T]) Path(t batch.Time) string { return filepath.Join(s.cfg.Dir, s.Name(t)) }

// parse returns the batch time of a final file name, and whether it is one.
func (s *Sink[T]) parse(name string) (batch.Time, bool) {
	digits, ok := strings.CutPrefix(name, s.cfg.Prefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, s.cfg.Suffix); !ok {
		return 0, false
	}
	ms, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || s.Name(batch.Time(ms)) != name {
		return 0, false
	}
	return batch.Time(ms), true
}

// Batches returns the times of the batches written to Dir, in order.
func (s *Sink[T]) Batches() ([]batch.Time, error) {
	entries, err := s.dir.ReadDir()
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	var ts []batch.Time
	for _, e := range entries {
		if t, ok := s.parse(e.Name()); ok && e.Type().IsRegular() {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts, nil
}

// Write writes batch b to its file, Path(b.Time()), atomically: to a
// temporary file that is synced, then renamed, then the directory synced.
// If a regular file of that name exists, and ctx is a pipeline's with a
// recovery log (stream.HasRecovery) or the file holds what Write would
// write of b (Format and Encode deterministic), the batch was written
// before: a recomputed batch has the same time and records, and only this
// user can write the directory. Write then only syncs the directory, since a crash
// may have come between the rename and that sync, and applies the
// retention. A file that holds anything else is an earlier batch's of the
// same time, which a pipeline without a recovery log makes after its wall
// clock went back (a restart with the clock behind the earlier Run's
// batches): Write keeps the file, writes nothing and returns an error
// wrapping ErrTimeReused, so that the batch is not completed as if its
// records were written. Anything else of that
// name (a symbolic link, a directory) is an error naming it: the batch is
// not written, and not reported as written.
// An empty batch writes nothing unless Config.WriteEmpty is set: Write
// returns nil. That keeps exactly-once: a recomputed batch has the same
// records (G2), so one empty when first run is empty again (given
// deterministic functions, as its file's content needs anyway).
// After writing a file, Write removes the old files retention no longer
// keeps (Config.Keep, Config.MaxAge), only ever of batches a restart cannot
// run again: b and the later ones may run again, and so may, in a stateful
// pipeline, the empty batches of its last run of empty batches, logged
// together and completed only by a later entry (up to 10 s of them, and
// the batch after them: the repository's DESIGN.md, G3). So Write keeps
// the files of batches from 10 s before the batch preceding b (the newest
// file before b's) on, whatever the retention: a file removed and then
// written again would be a batch delivered twice. A pipeline runs its
// batches one at a time in time order, so the batches before those
// completed, and a restart never runs them again.
// A Sink serves one output of a pipeline's Run: the batches of two outputs
// of a time would go to one file, and the second output's be taken for the
// first's, written before. Write called from another output (ctx tells it)
// than the one that wrote with the Sink before in the Run, or from another
// pipeline's Run while that one still runs, writes nothing and returns an
// error saying to give each output a Sink of its own, which stops Run at
// once, without the output's retries.
// On error the temporary file is removed, and no file of that name exists
// unless the rename was done and only the directory sync failed; a retry
// then finishes the sync and the retention.
func (s *Sink[T]) Write(ctx context.Context, b *batch.Batch[T]) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.oneOutput(ctx); err != nil {
		return fmt.Errorf("files: batch %v: %w", b.Time(), err)
	}
	if b.Len() == 0 && !s.cfg.WriteEmpty {
		return nil
	}
	final := s.Name(b.Time())
	switch _, err := s.dir.Lstat(final); {
	case err == nil:
		// The batch written before: with a recovery log a batch time is
		// never reused, so the file is this batch's, recomputed after a
		// crash (whether or not Format and Encode are deterministic).
		// Without one, only if the file holds its records: a Run whose
		// wall clock went back repeats an earlier Run's times.
		if !stream.HasRecovery(ctx) {
			if err := s.holds(ctx, final, b); err != nil {
				return fmt.Errorf("files: batch %v: %w", b.Time(), err)
			}
		}
		// The file's data was synced before its rename; its name may not
		// be durable yet, and the batch must not complete before it is.
		// Then retention as after a write: a write whose directory sync
		// failed after the rename did not index the file, which retention
		// would otherwise never remove.
		if err := s.dir.Sync(); err != nil {
			return fmt.Errorf("files: batch %v: %w", b.Time(), err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("files: batch %v: %w", b.Time(), err)
	default:
		tmp, err := s.writeTemp(ctx, b)
		if err != nil {
			return fmt.Errorf("files: batch %v: %w", b.Time(), err)
		}
		if err := s.publish(tmp, final); err != nil {
			s.dir.Remove(tmp)
			return fmt.Errorf("files: batch %v: %w", b.Time(), err)
		}
	}
	if err := s.retain(b.Time()); err != nil {
		return fmt.Errorf("files: batch %v written; removing old files: %w", b.Time(), err)
	}
	return nil
}

// oneOutput returns an error, marked as no retry fixes (internal/noretry),
// if ctx is that of another output of the pipeline's Run than the one
// that wrote with the Sink before, or of another Run while that one still
// runs (another pipeline): both outputs' batches of a time would go to one
// file, and the second one's would be taken for written. A Run after the
// one before ended (an in-process restart) may write with it from any
// output.
func (s *Sink[T]) oneOutput(ctx context.Context) error {
	clash, first := s.owner.Claim(ctx, true)
	switch clash {
	case outputid.OtherOutput:
		out, _ := outputid.Of(ctx)
		return noretry.Mark(fmt.Errorf("output %d of the pipeline writes with the Sink of %s, and so does output %d: "+
			"both outputs' batches of a time would go to one file, and the second one's be taken for written before; "+
			"give each output a Sink of its own, with a Dir of its own", first, s.cfg.Dir, out))
	case outputid.OtherRun:
		return noretry.Mark(fmt.Errorf("another pipeline, still running, writes with the Sink of %s: "+
			"both pipelines' batches of a time would go to one file, and the second one's be taken for written before; "+
			"give each output a Sink of its own, with a Dir of its own", s.cfg.Dir))
	}
	return nil
}

// holds returns nil if the file final holds what Write writes of b, and
// otherwise an error wrapping ErrTimeReused, naming the file and the fix.
// It encodes b again and compares as it goes, holding no copy of either.
func (s *Sink[T]) holds(ctx context.Context, final string, b *batch.Batch[T]) error {
	same, err := s.dir.HoldsFunc(final, func(w io.Writer) error {
		bw := bufio.NewWriter(w) // w itself, a bufio.Writer
		if err := s.encode(ctx, bw, b); err != nil {
			return err
		}
		return bw.Flush()
	})
	switch {
	case err != nil:
		return fmt.Errorf("compare with %s: %w", s.Path(b.Time()), err)
	case !same:
		return fmt.Errorf("%w: %s holds other records than this batch's: the batch time was an earlier batch's, "+
			"as without a recovery log after the wall clock went back (or Format or Encode changed, or is not deterministic); "+
			"the batch is not written and the file is kept. Set stream.Config.Recovery, whose batch times never go back, "+
			"or move the files of this time and later out of %s", ErrTimeReused, s.Path(b.Time()), s.cfg.Dir)
	}
	return nil
}

// writeTemp writes b to a new temporary file in Dir, syncs and closes it,
// and returns its name. On error, or a panic of Format or Encode, it
// closes and removes the file.
func (s *Sink[T]) writeTemp(ctx context.Context, b *batch.Batch[T]) (string, error) {
	f, name, err := s.dir.CreateTemp(s.Name(b.Time()))
	if err != nil {
		return "", err
	}
	written := false
	defer func() {
		if !written {
			f.Close()
			s.dir.Remove(name)
		}
	}()
	w := bufio.NewWriter(f)
	if err := s.encode(ctx, w, b); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	written = true
	return name, nil
}

// encode writes b's records with Encode or Format.
func (s *Sink[T]) encode(ctx context.Context, w *bufio.Writer, b *batch.Batch[T]) error {
	if s.cfg.Encode != nil {
		return s.cfg.Encode(w, b)
	}
	for _, part := range b.Parts() {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, v := range part {
			if _, err := w.Write(s.cfg.Format(v)); err != nil {
				return err
			}
			if err := w.WriteByte('\n'); err != nil {
				return err
			}
		}
	}
	return nil
}

// publish renames tmp to final and syncs the directory, so that the name
// survives a crash.
func (s *Sink[T]) publish(tmp, final string) error {
	if s.beforeRename != nil {
		if err := s.beforeRename(s.dir.Join(tmp)); err != nil {
			return err
		}
	}
	if err := s.dir.Rename(tmp, final); err != nil {
		return err
	}
	if s.syncAfterRename != nil {
		return s.syncAfterRename()
	}
	return s.dir.Sync()
}
