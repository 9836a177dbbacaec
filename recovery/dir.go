package recovery

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/durable"
)

// DefaultSegmentSize is the size at which a directory log starts a new
// segment file when DirConfig.SegmentSize is 0.
const DefaultSegmentSize = 64 << 20

// Names in a log directory. Segments are numbered from 1; a base segment
// (written by Replace) supersedes every segment numbered below it. Files
// are written through temporary files of fresh names (durable.TempOf tells
// them), removed at open; compact.tmp and snapshot.tmp are the fixed names
// earlier versions used, also removed at open.
const (
	lockName    = "LOCK"
	compactTemp = "compact.tmp"
	segSuffix   = ".log"
	baseSuffix  = ".base.log"
)

// DirConfig configures a log kept in a local directory: segment files of
// framed, checksummed records, fsynced before Append returns, and a LOCK
// file held with flock(2) while the log is open, so that two processes (or
// two opens in one process) cannot write the same directory. State
// snapshots are files of their own in it. It is an Opener.
//
// An open directory log keeps its records in memory, to serve Read;
// compacting regularly bounds both memory and disk use. Records are at
// most 16 MiB. If a write or fsync fails, the log's state on disk is
// unknown: every later call returns that error, and the log must be closed
// and opened again, which recovers the state the disk holds. So it is when
// Append finds its segment file removed (the directory deleted, a cleaner of
// old temporary files): writes to the open file would still succeed, into a
// file no restart reads.
type DirConfig struct {
	// Path is the directory. It is created if it does not exist, with its
	// missing parents, with mode 0700 (Perm plus search where read is
	// granted). A directory that group or others can write, or that another
	// user owns, is refused: they could plant files (or symbolic links,
	// which weir never follows in it) that the log would trust. It must be
	// on a local file system: the lock is flock(2), which a network file
	// system may keep to one machine (an NFS mount with nolock or
	// local_lock does), so that workers on two machines could write the
	// log at once. A log that a worker restarted on another machine must
	// find belongs in DynamoDB (package dynamolog). Required.
	Path string
	// Perm is the permission of the log's files (segments, snapshots, its
	// LOCK), filtered by the umask. It must let the owner read and write and
	// must not let group or others write. Zero means 0600.
	Perm fs.FileMode
	// SegmentSize is the size in bytes beyond which the next append starts a
	// new segment file. Zero means DefaultSegmentSize (64 MiB).
	SegmentSize int64
	// Logger receives warnings, such as a torn entry dropped at open.
	// Default slog.Default().
	Logger *slog.Logger
	// LockWait is how long opening the log waits for another writer that
	// holds the directory's lock to release it, as a predecessor that is
	// still exiting does when it dies, before failing with ErrLocked.
	// Default DefaultLockWait (10s); negative means fail at once.
	LockWait time.Duration
}

// DefaultLockWait is DirConfig.LockWait's default: long enough for a
// process being stopped to exit.
const DefaultLockWait = 10 * time.Second

// Dir returns the configuration of a log in directory path, with defaults
// for the rest: recovery.Dir("ckpt") in a driver's configuration.
func Dir(path string) DirConfig { return DirConfig{Path: path} }

// Open opens the log; see OpenDir.
func (c DirConfig) Open(ctx context.Context) (Log, error) { return OpenDir(ctx, c) }

func (c DirConfig) validate() error {
	var problems []error
	if c.Path == "" {
		problems = append(problems, errors.New("Path empty: set the directory of the log"))
	}
	if c.SegmentSize < 0 {
		problems = append(problems, fmt.Errorf("SegmentSize %d: must be >= 0 (0 means %d)", c.SegmentSize, DefaultSegmentSize))
	}
	if err := durable.CheckPerm("Perm", c.Perm); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(problems...))
	}
	return nil
}

// dirLog is a Log and SnapshotStore kept in a local directory; see
// DirConfig. It serialises appends.
type dirLog struct {
	dir    string
	perm   fs.FileMode
	segMax int64
	logger *slog.Logger

	snapHook func() // tests only (export_test.go): called by PutSnapshot before it writes

	// snapMu is held by PutSnapshot, PruneSnapshots and Close, before mu;
	// mu guards what follows, and PutSnapshot does not hold it while it
	// writes.
	snapMu   sync.Mutex
	mu       sync.Mutex
	d        *durable.Dir // open until Close
	lock     *os.File
	f        *os.File // active segment, nil before the first append
	fname    string   // the active segment's name in the directory
	seg      uint64   // number of the active (or last) segment
	size     int64    // bytes in the active segment
	payloads [][]byte // encoded entries, in order
	broken   error
	closed   bool
}

// OpenDir opens the log in cfg.Path, creating the directory if needed; the
// Log is also a SnapshotStore. It
// takes the directory's lock (ErrLocked if another writer still holds it
// after cfg.LockWait),
// finishes a compaction a crash interrupted, and reads every segment. A torn
// last entry (the end of the last segment cut short by a crash, or damaged
// with nothing whole after it, as a power loss that kept its end but not its
// start leaves it) is dropped and the file truncated; any other damage is a
// *CorruptError naming the file and offset, and the log is not opened.
func OpenDir(ctx context.Context, cfg DirConfig) (Log, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &dirLog{dir: cfg.Path, perm: cfg.Perm, segMax: cfg.SegmentSize, logger: cfg.Logger}
	if l.segMax == 0 {
		l.segMax = DefaultSegmentSize
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	wait := cfg.LockWait
	if wait == 0 {
		wait = DefaultLockWait
	}
	if err := l.open(ctx, wait); err != nil {
		if l.f != nil {
			l.f.Close()
		}
		if l.lock != nil {
			l.lock.Close()
		}
		if l.d != nil {
			l.d.Close()
		}
		return nil, err
	}
	return l, nil
}

func (l *dirLog) open(ctx context.Context, lockWait time.Duration) error {
	d, err := durable.OpenDir(l.dir, l.perm)
	if err != nil {
		return fmt.Errorf("recovery: log directory: %w", err)
	}
	l.d = d
	lock, err := d.Open(lockName, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("recovery: open lock file: %w", err)
	}
	l.lock = lock
	switch err := lockFile(ctx, lock, lockWait, l.logger); {
	case errors.Is(err, ErrLocked):
		return fmt.Errorf("recovery: lock log directory %s: %w (another pipeline, in this process or another, runs on it: give each pipeline a directory of its own, or stop the other first)", l.dir, err)
	case err != nil:
		return fmt.Errorf("recovery: lock log directory %s: %w", l.dir, err)
	}
	if err := l.removeTemps(); err != nil { // torn by a crash
		return err
	}
	segs, err := l.segments()
	if err != nil {
		return err
	}
	for i, s := range segs {
		if err := l.readSegment(s, i == len(segs)-1); err != nil {
			return err
		}
		l.seg = s.num
	}
	return nil
}

type segment struct {
	num  uint64
	base bool
	name string
	path string // for messages
}

// segments lists the segments in effect, in order: those from the last base
// segment on. It removes the segments a base supersedes, which a crash during
// Replace may have left.
func (l *dirLog) segments() ([]segment, error) {
	des, err := l.d.ReadDir()
	if err != nil {
		return nil, fmt.Errorf("recovery: list log directory: %w", err)
	}
	var segs []segment
	for _, de := range des {
		if s, ok := parseSegment(de.Name()); ok {
			s.name, s.path = de.Name(), l.d.Join(de.Name())
			segs = append(segs, s)
		}
	}
	slices.SortFunc(segs, func(a, b segment) int { return compareUint(a.num, b.num) })
	from := 0
	for i, s := range segs {
		if i > 0 && s.num == segs[i-1].num {
			return nil, &CorruptError{Path: s.path, Err: fmt.Errorf("two segments numbered %d", s.num)}
		}
		if s.base {
			from = i
		}
	}
	// The segments in effect are numbered on from the base segment, or
	// from 1 without one: a gap is a segment lost (deleted by hand, not
	// restored), whose records the log would otherwise go on without.
	for i, s := range segs[from:] {
		missing := s.num - 1 // the one before the first, which is not 1
		if i > 0 {
			missing = segs[from+i-1].num + 1
		}
		if (i > 0 && s.num != missing) || (i == 0 && !s.base && s.num != 1) {
			return nil, &CorruptError{Path: l.d.Join(segmentName(missing, false)),
				Err: fmt.Errorf("segment missing: the log goes on with %s", s.name)}
		}
	}
	for _, s := range segs[:from] {
		if err := l.d.Remove(s.name); err != nil {
			return nil, fmt.Errorf("recovery: remove compacted segment: %w", err)
		}
	}
	if from > 0 {
		if err := l.d.Sync(); err != nil {
			return nil, err
		}
	}
	return segs[from:], nil
}

func parseSegment(name string) (segment, bool) {
	var s segment
	num, ok := strings.CutSuffix(name, baseSuffix)
	if ok {
		s.base = true
	} else if num, ok = strings.CutSuffix(name, segSuffix); !ok {
		return s, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || len(num) != 20 || n == 0 {
		return s, false
	}
	s.num = n
	return s, true
}

func segmentName(num uint64, base bool) string {
	if base {
		return fmt.Sprintf("%020d%s", num, baseSuffix)
	}
	return fmt.Sprintf("%020d%s", num, segSuffix)
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readSegment reads a segment's entries. The last segment's torn tail is
// truncated away, and the segment is kept open for appends.
func (l *dirLog) readSegment(seg segment, last bool) error {
	path := seg.path
	data, err := l.d.ReadFile(seg.name)
	if err != nil {
		return fmt.Errorf("recovery: read segment: %w", err)
	}
	s, err := scanSegment(path, data, last)
	if err != nil {
		return err
	}
	l.payloads = append(l.payloads, s.payloads...)
	if !last {
		return nil
	}
	f, err := l.d.Open(seg.name, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("recovery: open segment: %w", err)
	}
	l.f, l.fname, l.size = f, seg.name, s.valid
	if s.torn == nil {
		return nil
	}
	l.logger.Warn("recovery: dropping the torn last entry of the log, left by a crash",
		"file", path, "offset", s.valid, "bytes", int64(len(data))-s.valid, "reason", s.torn)
	if err := f.Truncate(s.valid); err != nil {
		return fmt.Errorf("recovery: truncate torn entry: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("recovery: truncate torn entry: %w", err)
	}
	return nil
}

// Append appends records and fsyncs the segment; see Log.Append.
func (l *dirLog) Append(ctx context.Context, records ...[]byte) error {
	if err := checkRecords(records); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := usable(ctx, l.closed, l.broken); err != nil {
		return err
	}
	if len(records) == 0 {
		return nil
	}
	buf := frames(records)
	if l.f == nil || l.size >= l.segMax {
		if err := l.roll(); err != nil {
			return l.fail(err)
		}
	}
	if _, err := l.f.Write(buf); err != nil {
		return l.fail(err)
	}
	if err := l.f.Sync(); err != nil {
		return l.fail(err)
	}
	if err := l.inPlace(); err != nil {
		l.broken = err
		return err
	}
	l.size += int64(len(buf))
	l.payloads = append(l.payloads, clone(records)...)
	return nil
}

// checkRecords refuses records a frame cannot hold: an empty one, or one
// longer than maxFrame (ErrEntryTooLarge).
func checkRecords(records [][]byte) error {
	for i, r := range records {
		switch {
		case len(r) == 0:
			return fmt.Errorf("recovery: record %d is empty", i)
		case len(r) > maxFrame:
			return fmt.Errorf("%w: record %d is %d bytes, more than the %d a directory log stores in one entry",
				ErrEntryTooLarge, i, len(r), maxFrame)
		}
	}
	return nil
}

// clone returns a deep copy of records.
func clone(records [][]byte) [][]byte {
	out := make([][]byte, len(records))
	for i, r := range records {
		out[i] = slices.Clone(r)
	}
	return out
}

// fail records a write failure: the log's state on disk is now unknown.
func (l *dirLog) fail(err error) error {
	l.broken = fmt.Errorf("recovery: log %s failed, close and reopen it: %w", l.dir, err)
	return l.broken
}

// inPlace returns an error naming the fix when the active segment is no
// longer the file of its name in the log's directory: removed, with the
// directory or alone (rm -rf, a cleaner of old temporary files), what was
// appended to it is in no file a restart reads, though every write and
// fsync of the open file succeeds.
func (l *dirLog) inPlace() error {
	open, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("recovery: log %s: %w", l.dir, err)
	}
	if now, err := l.d.Lstat(l.fname); err == nil && os.SameFile(open, now) {
		return nil
	}
	return fmt.Errorf("recovery: log %s: its segment %s was removed while the log was open (the directory deleted, or cleaned by a remover of old "+
		"temporary files such as systemd-tmpfiles or tmpwatch): what it logs would be lost by a restart; "+
		"fix: keep the log's directory where nothing removes its files (not under /tmp), and start again", l.dir, l.fname)
}

// roll starts the next segment file.
func (l *dirLog) roll() error {
	name := segmentName(l.seg+1, false)
	f, err := l.d.Create(name, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	if err := l.d.Sync(); err != nil {
		f.Close()
		return err
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.fname, l.seg, l.size = f, name, l.seg+1, 0
	return nil
}

// Read returns the log's records; see Log.Read.
func (l *dirLog) Read(ctx context.Context) ([][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := usable(ctx, l.closed, l.broken); err != nil {
		return nil, err
	}
	return clone(l.payloads), nil
}

// Replace writes records to a new base segment and removes the segments
// before it; see Log.Replace. The base segment is written to a temporary
// file, fsynced and renamed into place, so a crash leaves either the old
// segments or the new base in effect.
func (l *dirLog) Replace(ctx context.Context, records [][]byte) error {
	if err := checkRecords(records); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := usable(ctx, l.closed, l.broken); err != nil {
		return err
	}
	buf := frames(records)
	num := l.seg + 1
	if renamed, err := l.d.WriteFile(segmentName(num, true), buf); err != nil {
		if renamed {
			// The base segment may or may not be in effect after a crash:
			// appending to the old segment could lose records.
			return l.fail(fmt.Errorf("compact: %w", err))
		}
		return fmt.Errorf("recovery: compact: %w", err)
	}
	// The base segment is in effect: what follows only tidies up, and a
	// crash here is finished by the next open.
	if l.f != nil {
		l.f.Close()
	}
	// The next append starts a new segment after the base.
	l.f, l.seg, l.size, l.payloads = nil, num, 0, clone(records)
	if _, err := l.segments(); err != nil {
		l.logger.Warn("recovery: could not remove compacted segments; the next open will", "dir", l.dir, "err", err)
	}
	return nil
}

// Close closes the active segment and releases the directory lock; see
// Log.Close.
func (l *dirLog) Close() error {
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	if l.f != nil {
		errs = append(errs, l.f.Close())
	}
	errs = append(errs, l.lock.Close(), l.d.Close())
	l.payloads = nil
	return errors.Join(errs...)
}

// removeTemps removes the temporary files of segments and snapshots a crash
// left. The log is being opened.
func (l *dirLog) removeTemps() error {
	des, err := l.d.ReadDir()
	if err != nil {
		return fmt.Errorf("recovery: list log directory: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		if !isTemp(name) {
			continue
		}
		if err := l.d.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("recovery: remove %s: %w", l.d.Join(name), err)
		}
	}
	return nil
}

// isTemp reports whether name is a temporary file of a segment or snapshot.
func isTemp(name string) bool {
	if name == compactTemp || name == snapTemp {
		return true
	}
	final, ok := durable.TempOf(name)
	if !ok {
		return false
	}
	_, seg := parseSegment(final)
	_, snap := parseSnapshotName(final)
	return seg || snap
}
