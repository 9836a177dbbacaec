package deadletter

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/dirlock"
	"github.com/weirstream/weir/internal/durable"
	"github.com/weirstream/weir/internal/runname"
	"github.com/weirstream/weir/stream"
)

// ErrLocked is wrapped by the error Open returns when another Dir, in this
// process or another, has the directory.
var ErrLocked = errors.New("deadletter: directory in use")

// ErrClosed is returned by Quarantine and Letters after Close.
var ErrClosed = errors.New("deadletter: closed")

// ErrTimeReused is wrapped by the error Quarantine returns, in a pipeline
// without a recovery log, for letters whose batch time and output have a
// file holding other letters: a batch of an earlier Run had that time,
// which happens when the wall clock went back (see Quarantine). The
// letters are not written, and the file is kept.
var ErrTimeReused = errors.New("deadletter: batch time already quarantined with other letters")

// DefaultLockWait is how long Open waits for another Dir that has the
// directory to release it: long enough for a process being stopped to
// exit.
const DefaultLockWait = 10 * time.Second

// lockName is the lock file held while a Dir is open.
const lockName = ".lock"

// Dir is a directory of dead letters: a stream.DeadLetters. Each call of
// Quarantine writes the file "letters-<batch time>-<output>.jsonl" (the
// batch time in milliseconds, zero-padded to 13 digits, and the output's
// index, zero-padded to 3: an output of 1,000 or more has more, so names
// do not sort by output, and Letters and Read order by number), one
// stream.DeadLetter in JSON per line, in Index order, replacing the file a
// crashed run may have written for the same batch and output (with a
// recovery log; see Quarantine for a pipeline without one). Files are
// readable and writable by their owner only (0600), and the directory must
// be writable by its owner only (see Open). A Dir serves the outputs of
// one running pipeline: the letters of another, running at the same time,
// would replace its own, so Quarantine refuses them (see Quarantine). A
// Dir is safe for concurrent use; it holds the directory's lock until
// Close.
type Dir struct {
	dir    *durable.Dir
	lock   *dirlock.Lock
	closed atomic.Bool

	mu sync.Mutex // guards run and runDone
	// run is the name (internal/runname) of the pipeline Run that last
	// quarantined here, and runDone its context's Done, closed once it
	// ended: another Run while it runs is refused (see Quarantine).
	run     string
	runDone <-chan struct{}
}

var _ stream.DeadLetters = (*Dir)(nil)

// Open opens the directory at path as a Dir, creating it (mode 0700) if
// needed, locks it (waiting up to DefaultLockWait, logged on
// slog.Default, for another Dir that has it to release it, as a
// predecessor that is still exiting does; an error wrapping ErrLocked if
// it still has it then: two writers would replace each other's files),
// and removes the temporary files a crash left. It refuses a directory
// that group or others can write, or another user owns: files planted
// there would be taken for letters. Close releases the lock.
func Open(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("deadletter: empty path: name the directory to keep dead letters in")
	}
	dir, err := durable.OpenDir(path, 0)
	if err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	lock, err := dirlock.AcquireWait(context.Background(), dir, lockName, clock.Real{}, DefaultLockWait, func() {
		slog.Warn("deadletter: the directory is locked by another Dir; waiting for it to exit", "dir", path, "wait", DefaultLockWait)
	})
	switch {
	case errors.Is(err, dirlock.ErrLocked):
		dir.Close()
		return nil, fmt.Errorf("%w: %s (another pipeline or tool has it open: give each pipeline its own directory, or stop the other first)", ErrLocked, path)
	case err != nil:
		dir.Close()
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	d := &Dir{dir: dir, lock: lock}
	if err := d.removeTemps(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the directory's lock; it is idempotent.
func (d *Dir) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	return errors.Join(d.lock.Release(), d.dir.Close())
}

// removeTemps removes the temporary files of letter files a crash left.
func (d *Dir) removeTemps() error {
	entries, err := d.dir.ReadDir()
	if err != nil {
		return fmt.Errorf("deadletter: %w", err)
	}
	for _, e := range entries {
		if final, ok := durable.TempOf(e.Name()); ok {
			if _, _, ok := parseName(final); ok {
				if err := d.dir.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("deadletter: remove a crash's temporary file: %w", err)
				}
			}
		}
	}
	return nil
}

// fileName returns the name of the file of a batch's letters from output.
func fileName(t batch.Time, output int) string {
	return fmt.Sprintf("letters-%013d-%03d.jsonl", int64(t), output)
}

// parseName returns the batch time and output of a letter file's name.
func parseName(name string) (batch.Time, int, bool) {
	rest, ok := strings.CutPrefix(name, "letters-")
	if !ok {
		return 0, 0, false
	}
	rest, ok = strings.CutSuffix(rest, ".jsonl")
	ts, outs, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseInt(ts, 10, 64)
	out, err2 := strconv.Atoi(outs)
	if err1 != nil || err2 != nil || fileName(batch.Time(ms), out) != name {
		return 0, 0, false
	}
	return batch.Time(ms), out, true
}

// Quarantine writes letters, all of one batch and output, to their file,
// atomically and durably: to a temporary file that is synced, renamed over
// the file, then the directory synced. It returns nil only once all of
// that is done.
//
// A file already there for the batch and output is replaced when ctx is
// that of a pipeline with a recovery log (stream.HasRecovery): its batch
// times never repeat, so the file is this batch's, written before a crash,
// and the batch recomputed may fail other records than the first time.
// Otherwise (no recovery log, or a ctx of no pipeline) it is replaced only
// by the same letters: a pipeline without a log takes its batch times
// from the wall clock, and a Run whose clock went back behind an earlier
// Run's batches repeats their times. Quarantine then keeps the file,
// writes nothing and returns an error wrapping ErrTimeReused, which fails
// the batch rather than lose the earlier letters.
//
// Letters from a pipeline's Run (ctx tells it) while another pipeline's
// Run that quarantined here still runs are not written: Quarantine returns
// an error saying to give each pipeline a directory of its own, which
// fails the batch. A Run after the other ended may use the Dir.
func (d *Dir) Quarantine(ctx context.Context, letters []stream.DeadLetter) error {
	if len(letters) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.closed.Load() {
		return ErrClosed
	}
	if err := d.oneRun(ctx); err != nil {
		return err
	}
	t, out := letters[0].Time, letters[0].Output
	for _, l := range letters {
		if l.Time != t || l.Output != out {
			return fmt.Errorf("deadletter: letters of batch %v output %d and batch %v output %d in one call: quarantine each batch and output apart", t, out, l.Time, l.Output)
		}
	}
	// Written (and compared) as encoded: when every record of a big batch
	// fails, the file holds the failure's stack once per record, too much
	// to make in memory first.
	write := func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, l := range letters {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return nil
	}
	name := fileName(t, out)
	if !stream.HasRecovery(ctx) {
		switch same, err := d.dir.HoldsFunc(name, write); {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("deadletter: batch %v: compare with %s: %w", t, d.dir.Join(name), err)
		case !same:
			return fmt.Errorf("%w: %s holds other letters than these of batch %v output %d: the batch time was an earlier Run's, "+
				"as in a pipeline without a recovery log after the wall clock went back; the letters are not written and the file is kept. "+
				"Set stream.Config.Recovery, whose batch times never go back, or move the files of this time and later out of %s",
				ErrTimeReused, d.dir.Join(name), t, out, d.dir.Path())
		}
	}
	_, err := d.dir.WriteFileFunc(name, write)
	if err != nil {
		return fmt.Errorf("deadletter: batch %v: %w", t, err)
	}
	return nil
}

// oneRun returns an error if ctx is a pipeline Run's other than the one
// that last quarantined here, while that one still runs: two pipelines'
// letters of a batch time and output would go to one file, each
// replacing the other's. A Run after the other ended takes the Dir over.
func (d *Dir) oneRun(ctx context.Context) error {
	run := runname.Of(ctx)
	if run == "" {
		return nil // not a pipeline's: nothing to tell apart
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.run != "" && d.run != run {
		select {
		case <-d.runDone:
		default:
			return fmt.Errorf("deadletter: %s: another pipeline, still running, quarantines here too: "+
				"the letters of both of a batch time and output would go to one file, each replacing the other's; "+
				"give each pipeline a directory of its own (a Dir serves the outputs of one pipeline)", d.dir.Path())
		}
	}
	d.run, d.runDone = run, ctx.Done()
	return nil
}

// Letters returns every letter in the directory, by batch time, then
// output, then Index.
func (d *Dir) Letters() ([]stream.DeadLetter, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	return readLetters(d.dir)
}

// Read returns every letter in the directory at path, as Letters does,
// without locking it: for a tool that lists them while a pipeline writes
// there (each file is replaced whole, so a read sees every file whole). It
// refuses a directory Open would refuse, and one that does not exist.
func Read(path string) ([]stream.DeadLetter, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	dir, err := durable.OpenDir(path, 0)
	if err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	defer dir.Close()
	return readLetters(dir)
}

// readLetters reads the letter files of dir, by batch time, then output,
// as numbers: the names do not sort so, as the output's 3 digits of
// padding do not hold 1,000 and more ("-1000" comes between "-100" and
// "-101" by name).
func readLetters(dir *durable.Dir) ([]stream.DeadLetter, error) {
	entries, err := dir.ReadDir()
	if err != nil {
		return nil, fmt.Errorf("deadletter: %w", err)
	}
	type file struct {
		name string
		t    batch.Time
		out  int
	}
	var files []file
	for _, e := range entries {
		if t, out, ok := parseName(e.Name()); ok && e.Type().IsRegular() {
			files = append(files, file{e.Name(), t, out})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.out, b.out)) })
	var all []stream.DeadLetter
	for _, f := range files {
		data, err := dir.ReadFile(f.name)
		if err != nil {
			return nil, fmt.Errorf("deadletter: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, len(data)+1)
		for line := 1; sc.Scan(); line++ {
			var l stream.DeadLetter
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				return nil, fmt.Errorf("deadletter: %s line %d: %w", dir.Join(f.name), line, err)
			}
			all = append(all, l)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("deadletter: %s: %w", dir.Join(f.name), err)
		}
	}
	return all, nil
}
