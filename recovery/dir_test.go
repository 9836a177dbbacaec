package recovery_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/recovery/recoverytest"
)

func TestDirConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		recoverytest.Run(t, func(t *testing.T) recovery.Opener { return recovery.Dir(t.TempDir()) })
	})
	t.Run("tiny segments", func(t *testing.T) {
		recoverytest.Run(t, func(t *testing.T) recovery.Opener {
			return recovery.DirConfig{Path: filepath.Join(t.TempDir(), "new", "log"), SegmentSize: 300}
		})
	})
}

// openDir opens a directory log through the driver's view.
func openDir(t *testing.T, cfg recovery.DirConfig) *recoverylog.Log {
	t.Helper()
	l, err := recovery.OpenDir(t.Context(), cfg)
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return recoverylog.Wrap(l, nil)
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestDirLocked checks, in virtual time, that opening a directory log
// another writer holds waits, logging it, for the holder to release it (a
// predecessor that is exiting) up to DirConfig.LockWait, and fails with
// ErrLocked after that, or at once with a negative LockWait.
func TestDirLocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		var logs bytes.Buffer
		cfg := recovery.DirConfig{Path: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		l := openDir(t, cfg)

		start := time.Now()
		if _, err := recovery.OpenDir(t.Context(), cfg); !errors.Is(err, recovery.ErrLocked) || !strings.Contains(err.Error(), "give each pipeline a directory of its own") {
			t.Fatalf("second OpenDir: got %v, want ErrLocked saying what to do", err)
		}
		if waited := time.Since(start); waited != recovery.DefaultLockWait {
			t.Errorf("second OpenDir failed after %v, want after %v", waited, recovery.DefaultLockWait)
		}
		if !strings.Contains(logs.String(), "locked by another writer") {
			t.Errorf("the wait was not logged: %q", logs.String())
		}

		noWait := cfg
		noWait.LockWait = -1
		start = time.Now()
		if _, err := recovery.OpenDir(t.Context(), noWait); !errors.Is(err, recovery.ErrLocked) || time.Since(start) != 0 {
			t.Fatalf("OpenDir with LockWait -1: got %v after %v, want ErrLocked at once", err, time.Since(start))
		}

		// The holder exits 3 s into the wait: the open succeeds then.
		go func() {
			time.Sleep(3 * time.Second)
			l.Close()
		}()
		start = time.Now()
		openDir(t, cfg)
		if waited := time.Since(start); waited < 3*time.Second || waited > 4*time.Second {
			t.Errorf("OpenDir took %v, want from 3s to 4s (the holder exits at 3s, tries are at most 0.5s apart)", waited)
		}
	})
}

func TestDirInvalidConfig(t *testing.T) {
	_, err := recovery.OpenDir(t.Context(), recovery.DirConfig{SegmentSize: -1, Perm: 0o666})
	if !errors.Is(err, recovery.ErrInvalidConfig) {
		t.Fatalf("OpenDir: got %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"Path empty", "SegmentSize -1", "Perm 0666: must not let group or others write"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("OpenDir error %q does not contain %q", err, want)
		}
	}
}

// writeLog appends History() to a new directory log, one entry per append,
// and returns the directory and the last segment's size before and after
// the last entry.
func writeLog(t *testing.T, segSize int64) (dir string, lastStart, lastEnd int64) {
	t.Helper()
	dir = t.TempDir()
	l := openDir(t, recovery.DirConfig{Path: dir, SegmentSize: segSize})
	h := logtest.History()
	for _, e := range h[:len(h)-1] {
		mustAppend(t, l, e)
	}
	segs := segmentFiles(t, dir)
	lastStart = fileSize(t, segs[len(segs)-1])
	mustAppend(t, l, h[len(h)-1])
	if got := segmentFiles(t, dir); len(got) != len(segs) {
		t.Fatalf("the last append started a new segment; choose another segment size")
	}
	l.Close()
	return dir, lastStart, fileSize(t, segs[len(segs)-1])
}

// TestDirTornTail cuts the last entry short at every byte, as a crash
// during its write may, and checks that the log opens without it and takes
// appends.
func TestDirTornTail(t *testing.T) {
	for _, segSize := range []int64{0, 400} {
		t.Run(fmt.Sprint("segment size ", segSize), func(t *testing.T) {
			orig, start, end := writeLog(t, segSize)
			h := logtest.History()
			for cut := start; cut < end; cut++ {
				dir := copyDir(t, orig)
				segs := segmentFiles(t, dir)
				if err := os.Truncate(segs[len(segs)-1], cut); err != nil {
					t.Fatal(err)
				}
				checkReopen(t, dir, h[:len(h)-1])
			}
		})
	}
	t.Run("zero-filled tail", func(t *testing.T) {
		orig, start, end := writeLog(t, 0)
		dir := copyDir(t, orig)
		seg := segmentFiles(t, dir)[0]
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		clear(data[start:end])
		if err := os.WriteFile(seg, append(data, make([]byte, 100)...), 0o644); err != nil {
			t.Fatal(err)
		}
		h := logtest.History()
		checkReopen(t, dir, h[:len(h)-1])
	})
	t.Run("start of the last entry lost", func(t *testing.T) {
		// A power loss may keep the end of the last append (a page of
		// its own) and the file's new size, but not its start (the tail
		// of the page before), which reads as zeros: its header is
		// gone, and nothing whole follows it.
		orig, start, end := writeLog(t, 0)
		h := logtest.History()
		for lost := start + 1; lost < end; lost++ {
			dir := copyDir(t, orig)
			seg := segmentFiles(t, dir)[0]
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			clear(data[start:lost])
			if err := os.WriteFile(seg, data, 0o644); err != nil {
				t.Fatal(err)
			}
			checkReopen(t, dir, h[:len(h)-1])
		}
	})
	t.Run("last payload damaged", func(t *testing.T) {
		orig, _, end := writeLog(t, 0)
		dir := copyDir(t, orig)
		flipByte(t, segmentFiles(t, dir)[0], end-1)
		h := logtest.History()
		checkReopen(t, dir, h[:len(h)-1])
	})
}

// checkReopen opens dir, expects want, appends one more entry and checks it
// survives another reopen.
func checkReopen(t *testing.T, dir string, want []recoverylog.Entry) {
	t.Helper()
	l := openDir(t, recovery.DirConfig{Path: dir})
	logtest.Check(t, l, want)
	more := logtest.Block(3, 0)
	mustAppend(t, l, more)
	l.Close()
	l = openDir(t, recovery.DirConfig{Path: dir})
	logtest.Check(t, l, append(slices.Clone(want), more))
	l.Close()
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x20
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDirCorrupt flips every byte of an entry in the middle of the log, in
// a segment before the last and in the last one, and checks the open fails
// naming the file and the entry's offset.
func TestDirCorrupt(t *testing.T) {
	tests := []struct {
		name    string
		segSize int64
		seg     int // segment to damage, from the end: 1 is the last
	}{
		{"single segment", 0, 1},
		{"earlier segment", 400, 2},
		{"last of several segments", 400, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig, _, _ := writeLog(t, tt.segSize)
			segs := segmentFiles(t, orig)
			seg := filepath.Base(segs[len(segs)-tt.seg])
			end := firstFrameEnd(t, filepath.Join(orig, seg))
			for off := range end {
				dir := copyDir(t, orig)
				path := filepath.Join(dir, seg)
				flipByte(t, path, off)
				wantCorrupt(t, dir, path, 0)
			}
		})
	}
	t.Run("earlier segment cut short", func(t *testing.T) {
		orig, _, _ := writeLog(t, 400)
		dir := copyDir(t, orig)
		path := segmentFiles(t, dir)[0]
		size := fileSize(t, path)
		if err := os.Truncate(path, size-1); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, dir, path, lastFrameStart(t, path))
	})
	t.Run("segment missing", func(t *testing.T) {
		// A segment deleted by hand (to free disk space, say) or lost in a
		// partial restore: its records are gone, and the log must say so
		// rather than open without them.
		orig, _, _ := writeLog(t, 400)
		if n := len(segmentFiles(t, orig)); n < 3 {
			t.Fatalf("%d segments, want 3 or more", n)
		}
		for _, i := range []int{0, 1} { // the first, one in the middle
			dir := copyDir(t, orig)
			path := segmentFiles(t, dir)[i]
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			wantCorrupt(t, dir, path, 0)
		}
		// After a compaction the base segment comes first.
		dir := copyDir(t, orig)
		l := openDir(t, recovery.Dir(dir))
		if err := l.Compact(t.Context()); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, logtest.Block(3, 0))
		l.Close()
		segs := segmentFiles(t, dir)
		if len(segs) != 2 || !strings.HasSuffix(segs[0], ".base.log") {
			t.Fatalf("segments after a compaction and an append: %v, want a base and one more", segs)
		}
		openDir(t, recovery.Dir(dir)).Close() // intact: opens
		if err := os.Remove(segs[0]); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, dir, strings.TrimSuffix(segs[0], ".base.log")+".log", 0)
	})
	t.Run("undecodable entry", func(t *testing.T) {
		// Intact frames whose second record does not decode: the log
		// opens, and the driver's Read refuses it. One written by a newer
		// weir is not damage, and is refused as such.
		for _, tc := range []struct {
			record, want string
			corrupt      bool
		}{
			{`{"v":1,"kind":"nope"}`, `unknown kind "nope"`, true},
			{`{"v":9}`, "version 9", false},
		} {
			dir := t.TempDir()
			path := filepath.Join(dir, "00000000000000000001.log")
			good, err := recoverylog.EncodeEntry(recoverylog.BatchCompleted(1))
			if err != nil {
				t.Fatal(err)
			}
			data := recovery.AppendFrameForTest(nil, good)
			data = recovery.AppendFrameForTest(data, []byte(tc.record))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			l := openDir(t, recovery.Dir(dir))
			_, err = l.Read(t.Context())
			var ce *recovery.CorruptError
			switch {
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Errorf("Read of %s: got %v, want an error saying %q", tc.record, err, tc.want)
			case tc.corrupt && (!errors.As(err, &ce) || ce.Offset != 1):
				t.Errorf("Read of %s: got %v, want a *CorruptError of record 1", tc.record, err)
			case !tc.corrupt && (errors.Is(err, recovery.ErrCorrupt) || !errors.Is(err, recoverylog.ErrNewerVersion)):
				t.Errorf("Read of %s: got %v, want ErrNewerVersion, not ErrCorrupt", tc.record, err)
			}
			l.Close()
		}
	})
}

// firstFrameEnd returns the end of the first frame of a segment, which
// starts at 0 and must be followed by another.
func firstFrameEnd(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := 12 + int64(binary.LittleEndian.Uint32(data))
	if end >= int64(len(data)) {
		t.Fatalf("%s holds a single frame", path)
	}
	return end
}

// lastFrameStart returns the offset of the last frame header in a segment
// that was cut short by one byte.
func lastFrameStart(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for {
		n := int64(binary.LittleEndian.Uint32(data[off:]))
		if off+12+n > int64(len(data)) {
			return off
		}
		off += 12 + n
	}
}

func wantCorrupt(t *testing.T, dir, path string, off int64) error {
	t.Helper()
	l, err := recovery.OpenDir(t.Context(), recovery.Dir(dir))
	if err == nil {
		l.Close()
		t.Fatalf("OpenDir of a log damaged at %s offset %d succeeded", path, off)
	}
	var ce *recovery.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, recovery.ErrCorrupt) {
		t.Fatalf("OpenDir: got %v, want a *CorruptError", err)
	}
	if ce.Path != path || ce.Offset != off {
		t.Fatalf("CorruptError at %s offset %d, want %s offset %d: %v", ce.Path, ce.Offset, path, off, err)
	}
	return err
}

// TestDirCompactInterrupted checks the states a crash during Compact can
// leave: a temporary file not yet renamed, and a base segment beside the
// segments it supersedes.
func TestDirCompactInterrupted(t *testing.T) {
	h := logtest.History()
	st, err := recoverylog.Recover(h)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := openDir(t, recovery.DirConfig{Path: dir, SegmentSize: 400})
	for _, e := range h {
		mustAppend(t, l, e)
	}
	l.Close()
	old := copyDir(t, dir)

	if err := os.WriteFile(filepath.Join(dir, "compact.tmp"), []byte("half a compaction"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = openDir(t, recovery.Dir(dir))
	logtest.Check(t, l, h)
	if err := l.Compact(t.Context()); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	l.Close()
	for _, seg := range segmentFiles(t, old) {
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(seg)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(segmentFiles(t, dir)); n < 3 {
		t.Fatalf("%d segments, want the base and at least two it supersedes", n)
	}
	l = openDir(t, recovery.Dir(dir))
	logtest.Check(t, l, st.Entries())
	l.Close()
	var names []string
	for _, s := range segmentFiles(t, dir) {
		names = append(names, filepath.Base(s))
	}
	if len(names) != 1 || !strings.HasSuffix(names[0], ".base.log") {
		t.Fatalf("segments after reopen: %v, want the base segment only", names)
	}
	if _, err := os.Stat(filepath.Join(dir, "compact.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("compact.tmp still there: %v", err)
	}
}

func TestDirEntryTooLarge(t *testing.T) {
	l := openDir(t, recovery.Dir(t.TempDir()))
	huge := batch.SeqRange{Stream: strings.Repeat("s", 17<<20), Shard: "shardId-000000000000", First: "1", Last: "2", Count: 2}
	err := l.Append(t.Context(), logtest.Block(0, 0),
		recoverylog.BlockStored(batch.BlockInfo{Ranges: []batch.SeqRange{huge}, Count: 2}))
	if !errors.Is(err, recovery.ErrEntryTooLarge) {
		t.Fatalf("Append: got %v, want ErrEntryTooLarge", err)
	}
	logtest.Check(t, l, nil)
}

func BenchmarkDirAppend(b *testing.B) {
	s, err := recovery.OpenDir(b.Context(), recovery.Dir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l := recoverylog.Wrap(s, nil)
	var seq uint64
	for b.Loop() {
		if err := l.Append(b.Context(), logtest.Block(0, seq)); err != nil {
			b.Fatal(err)
		}
		seq++
	}
}

// BenchmarkDirAppendParallel appends from several goroutines: appends are
// serialised, each paying its own fsync.
func BenchmarkDirAppendParallel(b *testing.B) {
	s, err := recovery.OpenDir(b.Context(), recovery.Dir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l := recoverylog.Wrap(s, nil)
	var src atomic.Int64
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		s := int(src.Add(1))
		var seq uint64
		for pb.Next() {
			if err := l.Append(context.Background(), logtest.Block(s, seq)); err != nil {
				b.Error(err)
				return
			}
			seq++
		}
	})
}

var mustAppend = logtest.MustAppend
