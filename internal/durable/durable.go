// Package durable holds what weir's local files need to be safe and to
// survive a crash. SyncDir makes a directory's entries (files created,
// renamed, removed) durable. Dir is a state directory opened so that what
// is found in it can be trusted: only its owner can write it, and the
// files weir opens in it are regular files, never symbolic links. The
// recovery log, the file sink and the lease table's state directory use
// it.
package durable

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// DefaultPerm is the permission of the files weir creates in a state
// directory when its configuration leaves it zero: the owner's only. A
// directory created for them gets the same bits plus search (x) where read
// is granted: 0700.
const DefaultPerm fs.FileMode = 0o600

// ErrUnsafe is wrapped by the errors of OpenDir and Dir's methods for a
// directory or a file that cannot be trusted: a directory others can write,
// or a symbolic link or another non-regular file where weir keeps a file.
var ErrUnsafe = errors.New("unsafe")

// tempPrefix starts the names of the temporary files CreateTemp makes:
// hidden, and never a name weir gives a final file.
const tempPrefix = ".tmp-"

// CheckPerm returns the problem with perm as the permission of a state
// directory's files, naming field (the configuration field it comes from),
// or nil. Zero is fine: it means DefaultPerm.
func CheckPerm(field string, perm fs.FileMode) error {
	switch {
	case perm == 0:
		return nil
	case perm&^fs.ModePerm != 0:
		return fmt.Errorf("%s %v: must hold permission bits only, such as 0600", field, perm)
	case perm&0o600 != 0o600:
		return fmt.Errorf("%s %#o: must let the owner read and write, such as 0600", field, uint32(perm))
	case perm&0o022 != 0:
		return fmt.Errorf("%s %#o: must not let group or others write (others could plant files weir would trust), such as 0600 or 0640", field, uint32(perm))
	}
	return nil
}

// dirPerm is the permission of a directory holding files of permission
// perm: search wherever read is granted.
func dirPerm(perm fs.FileMode) fs.FileMode { return perm | (perm&0o444)>>2 }

// Dir is an open state directory. Its files are named by their base names
// (no separators); every method refuses to follow a symbolic link in their
// place. A Dir is safe for concurrent use; Close closes it.
type Dir struct {
	root *os.Root
	perm fs.FileMode
}

// OpenDir opens directory path as a state directory whose files get
// permission perm (0 means DefaultPerm), filtered by the umask. It creates
// path and its missing parents if needed (search added to perm: 0700 by
// default), syncing the parent of each so their names survive a crash.
// Path itself may be a symbolic link to a directory. OpenDir refuses (an
// error wrapping ErrUnsafe, naming the fix) a directory that group or
// others can write, or that a user other than this process's or root
// owns: anyone else who can write it could plant files weir would read as
// its own, or links that would make it write elsewhere. On Windows, where
// file modes do not tell this, the checks are skipped.
func OpenDir(path string, perm fs.FileMode) (*Dir, error) {
	if perm == 0 {
		perm = DefaultPerm
	}
	if err := mkdirAllSync(path, dirPerm(perm)); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, fmt.Errorf("open directory: %w", err)
	}
	fi, err := root.Stat(".")
	if err == nil {
		err = checkDir(root.Name(), fi)
	}
	if err != nil {
		root.Close()
		return nil, err
	}
	return &Dir{root: root, perm: perm}, nil
}

// checkDir refuses a directory someone else than this process's user (or
// root) could write.
func checkDir(path string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", path)
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("%w: directory %s has mode %#o, writable by group or others, who could plant files there: run chmod go-w %s", ErrUnsafe, path, uint32(m), path)
	}
	if uid, ok := fileOwner(fi); ok && uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("%w: directory %s is owned by uid %d, not by this process's uid %d, so that user could plant files there: chown it, or use a directory of your own", ErrUnsafe, path, uid, os.Geteuid())
	}
	return nil
}

// Path returns the path of the directory, as given to OpenDir.
func (d *Dir) Path() string { return d.root.Name() }

// Join returns the path of file name in the directory, for messages.
func (d *Dir) Join(name string) string { return filepath.Join(d.root.Name(), name) }

// Close closes the directory. Files opened from it stay open.
func (d *Dir) Close() error { return d.root.Close() }

// Sync fsyncs the directory, making the creation, renaming and removal of
// its files durable.
func (d *Dir) Sync() error {
	f, err := d.root.Open(".")
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", d.Path(), err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", d.Path(), err)
	}
	return nil
}

// Create creates file name, which must not exist (a symbolic link there
// counts as existing and is not followed), opened with flag (os.O_WRONLY,
// os.O_RDWR, os.O_APPEND) and the directory's file permission.
func (d *Dir) Create(name string, flag int) (*os.File, error) {
	return d.root.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, d.perm)
}

// Open opens the existing regular file name with flag. A symbolic link or
// another non-regular file there is refused with an error wrapping
// ErrUnsafe, and nothing is opened (or truncated) through it. With
// os.O_CREATE in flag, a missing file is created as Create does.
func (d *Dir) Open(name string, flag int) (*os.File, error) {
	for range 3 {
		f, err := d.openExisting(name, flag&^(os.O_CREATE|os.O_EXCL))
		if !errors.Is(err, fs.ErrNotExist) || flag&os.O_CREATE == 0 {
			return f, err
		}
		f, err = d.Create(name, flag&^os.O_CREATE)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
		// Created by someone else since: open that one.
	}
	return nil, fmt.Errorf("open %s: created and removed again and again", d.Join(name))
}

// openExisting opens name if it is a regular file, and checks that the file
// opened is the one examined: a link swapped in between is refused too. It
// truncates only then, for os.O_TRUNC.
func (d *Dir) openExisting(name string, flag int) (*os.File, error) {
	fi, err := d.root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if err := regular(d.Join(name), fi); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(name, flag&^os.O_TRUNC, 0)
	if err != nil {
		return nil, err
	}
	ffi, err := f.Stat()
	if err == nil && !os.SameFile(fi, ffi) {
		err = fmt.Errorf("%w: %s was replaced while being opened", ErrUnsafe, d.Join(name))
	}
	if err == nil && flag&os.O_TRUNC != 0 {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// regular refuses a file that is not a regular one.
func regular(path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link, where weir keeps a file of its own; weir does not follow it: remove it", ErrUnsafe, path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file (%v), where weir keeps a file of its own: remove it", ErrUnsafe, path, fi.Mode().Type())
	}
	return nil
}

// Lstat describes file name without following a symbolic link, and refuses
// one that is not a regular file with an error wrapping ErrUnsafe.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	fi, err := d.root.Lstat(name)
	if err != nil {
		return nil, err
	}
	return fi, regular(d.Join(name), fi)
}

// ReadFile reads the regular file name, refusing a symbolic link as Open
// does.
func (d *Dir) ReadFile(name string) ([]byte, error) {
	f, err := d.Open(name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// ReadDir lists the directory's entries, sorted by name.
func (d *Dir) ReadDir() ([]fs.DirEntry, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return des, err
}

// Remove removes file name; a symbolic link is removed, not its target.
func (d *Dir) Remove(name string) error { return d.root.Remove(name) }

// Rename renames file oldname to newname, replacing what newname names
// (a symbolic link there is replaced, its target untouched).
func (d *Dir) Rename(oldname, newname string) error { return d.root.Rename(oldname, newname) }

// CreateTemp creates a new temporary file for the file final, named
// ".tmp-<final>.<random>", opened for writing. TempOf tells such names.
func (d *Dir) CreateTemp(final string) (*os.File, string, error) {
	for range 10000 {
		var r [8]byte
		rand.Read(r[:])
		name := tempPrefix + final + "." + hex.EncodeToString(r[:])
		f, err := d.Create(name, os.O_WRONLY)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("create a temporary file for %s: too many names taken", d.Join(final))
}

// TempOf returns the final name of a temporary file's name CreateTemp
// made, and whether it is one.
func TempOf(name string) (final string, ok bool) {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	if i := strings.LastIndexByte(rest, '.'); ok && i > 0 {
		return rest[:i], true
	}
	return "", false
}

// WriteFile writes data to file name atomically: to a temporary file that
// is fsynced, renamed to name, then the directory fsynced, so a crash
// leaves the old file or the new one (and perhaps a temporary file, which
// TempOf recognises). It reports whether the rename was done: if so and
// err is not nil, only the directory's sync failed.
func (d *Dir) WriteFile(name string, data []byte) (renamed bool, err error) {
	return d.WriteFileFunc(name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFileFunc is WriteFile with the data write writes to its writer, a
// buffered one: for data too large to make in memory first. An error of
// write leaves the file as it was; so does a panic of write, which goes on
// to the caller once the temporary file is closed and removed.
func (d *Dir) WriteFileFunc(name string, write func(w io.Writer) error) (renamed bool, err error) {
	f, tmp, err := d.CreateTemp(name)
	if err != nil {
		return false, err
	}
	closed := false
	defer func() { // also when write panics
		if !closed {
			f.Close()
		}
		if !renamed {
			d.Remove(tmp)
		}
	}()
	bw := bufio.NewWriter(f)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	closed = true
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, name)
	}
	if err != nil {
		return false, err
	}
	renamed = true
	return true, d.Sync()
}

// HoldsFunc reports whether the regular file name holds exactly the bytes
// write writes to its writer (a buffered one), comparing as write goes and
// holding no copy of either: whether a file WriteFileFunc wrote holds what
// it would write again. A file that cannot be read to the end is taken
// for one that differs. An error of write other than the one the
// comparison stops it with is returned, as is one opening the file.
func (d *Dir) HoldsFunc(name string, write func(w io.Writer) error) (bool, error) {
	f, err := d.Open(name, os.O_RDONLY)
	if err != nil {
		return false, err
	}
	defer f.Close()
	c := &comparer{r: bufio.NewReader(f)}
	bw := bufio.NewWriter(c)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	switch {
	case c.differs:
		return false, nil
	case err != nil:
		return false, err
	}
	if _, err := c.r.ReadByte(); err != io.EOF {
		return false, nil // the file holds more
	}
	return true, nil
}

// comparer is a Writer that compares what it is given with what r reads,
// and fails at the first difference.
type comparer struct {
	r       *bufio.Reader
	buf     []byte
	differs bool
}

// errDiffers stops a write whose bytes differ from the file's.
var errDiffers = errors.New("differs from the file")

func (c *comparer) Write(p []byte) (int, error) {
	if c.differs {
		return 0, errDiffers
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	got := c.buf[:len(p)]
	if _, err := io.ReadFull(c.r, got); err != nil || !bytes.Equal(got, p) {
		c.differs = true
		return 0, errDiffers
	}
	return len(p), nil
}

// SyncDir fsyncs directory dir, making the creation, renaming and removal
// of its files durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// mkdirAllSync creates dir and its missing parents with permission perm,
// and syncs the parent of each directory it creates: files synced into a
// new directory are lost with it after a crash unless the directory's own
// name is durable.
func mkdirAllSync(dir string, perm fs.FileMode) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) || filepath.Dir(d) == d {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	for _, d := range created {
		if err := SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}
