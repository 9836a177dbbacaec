package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

func newSink[T any](t *testing.T, cfg Config[T]) *Sink[T] {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dirNames returns the names in dir but the lock file, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != lockName {
			names = append(names, e.Name())
		}
	}
	return names
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config[int]
		parts    [][]int
		wantName string
		want     string
	}{
		{"default format", Config[int]{}, [][]int{{1, 2}, {3}}, "batch-1700000000000.txt", "1\n2\n3\n"},
		{"empty batch with WriteEmpty", Config[int]{WriteEmpty: true}, nil, "batch-1700000000000.txt", ""},
		{"format", Config[int]{Format: func(v int) []byte { return []byte{byte('a' + v)} }}, [][]int{{0, 1}}, "batch-1700000000000.txt", "a\nb\n"},
		{"encode", Config[int]{Encode: func(w io.Writer, b *batch.Batch[int]) error {
			return json.NewEncoder(w).Encode(b.Records())
		}, Prefix: "counts-", Suffix: ".json"}, [][]int{{4, 5}}, "counts-1700000000000.json", "[4,5]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSink(t, tt.cfg)
			if err := s.Write(t.Context(), batch.New(1700000000000, nil, tt.parts...)); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if diff := cmp.Diff([]string{tt.wantName}, dirNames(t, s.cfg.Dir)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if got := read(t, s.Path(1700000000000)); got != tt.want {
				t.Errorf("content %q, want %q", got, tt.want)
			}
			if fi, err := os.Stat(s.Path(1700000000000)); err != nil || fi.Mode().Perm() != DefaultPerm {
				t.Errorf("mode %v, %v; want %v", fi.Mode(), err, DefaultPerm)
			}
		})
	}
}

// TestEmptyBatchesWriteNothing checks that an idle pipeline's batches, all
// empty, leave no file by default, that a batch with records still gets its
// file, and that WriteEmpty writes the empty ones too (with what Encode
// writes for no records).
func TestEmptyBatchesWriteNothing(t *testing.T) {
	s := newSink(t, Config[string]{})
	for bt := batch.Time(1000); bt <= 60000; bt += 1000 {
		if err := s.Write(t.Context(), batch.New[string](bt, nil)); err != nil {
			t.Fatalf("Write of empty batch %v: %v", bt, err)
		}
	}
	if names := dirNames(t, s.cfg.Dir); len(names) != 0 {
		t.Errorf("an idle minute of 1s batches left %d files, want none: %v", len(names), names)
	}
	if err := s.Write(t.Context(), batch.New(61000, nil, []string{"x"})); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"batch-0000000061000.txt"}, dirNames(t, s.cfg.Dir)); diff != "" {
		t.Errorf("files after a batch with records (-want +got):\n%s", diff)
	}

	header := func(w io.Writer, b *batch.Batch[string]) error {
		_, err := fmt.Fprintf(w, "records %d\n", b.Len())
		return err
	}
	s = newSink(t, Config[string]{WriteEmpty: true, Encode: header})
	if err := s.Write(t.Context(), batch.New[string](1000, nil)); err != nil {
		t.Fatal(err)
	}
	if got := read(t, s.Path(1000)); got != "records 0\n" {
		t.Errorf("WriteEmpty: empty batch's file holds %q, want what Encode wrote", got)
	}
}

// TestRewriteSkipped checks exactly-once: a batch already written is not
// written again; and that a batch of the same time with other records (a
// time reused) fails with ErrTimeReused, whether it holds other records,
// fewer or more, the file kept as it was.
func TestRewriteSkipped(t *testing.T) {
	s := newSink(t, Config[string]{})
	ctx := t.Context()
	if err := s.Write(ctx, batch.New(2000, nil, []string{"first", "line"})); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, batch.New(2000, nil, []string{"first"}, []string{"line"})); err != nil {
		t.Fatalf("second Write of the batch: %v", err)
	}
	for _, recs := range [][]string{{"second"}, {"first"}, {"first", "line", "more"}, {"first", "lime"}} {
		if err := s.Write(ctx, batch.New(2000, nil, recs)); !errors.Is(err, ErrTimeReused) {
			t.Errorf("Write of %q at a time written with other records = %v, want ErrTimeReused", recs, err)
		}
	}
	if got := read(t, s.Path(2000)); got != "first\nline\n" {
		t.Errorf("content %q after a rewrite, want the first write's", got)
	}
	if err := s.Write(ctx, batch.New(1000, nil, []string{"earlier"})); err != nil {
		t.Fatal(err)
	}
	got, err := s.Batches()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]batch.Time{1000, 2000}, got); diff != "" {
		t.Errorf("Batches (-want +got):\n%s", diff)
	}
}

// TestCrashBeforeRename checks atomicity: a write that fails, or a process
// that dies, before the rename leaves no file under the batch's name; the
// next write of the batch writes it whole, and New clears a dead write's
// temporary file.
func TestCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	s := newSink(t, Config[string]{Dir: dir})
	boom := errors.New("power cut")
	var tmpSeen string
	s.beforeRename = func(tmp string) error {
		tmpSeen = tmp
		if got := read(t, tmp); got != "a\nb\n" {
			t.Errorf("temporary file holds %q before the rename, want the whole batch", got)
		}
		return boom
	}
	b := batch.New(3000, nil, []string{"a", "b"})
	if err := s.Write(t.Context(), b); !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want %v", err, boom)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("failed write left %v", names)
	}
	if got, _ := s.Batches(); len(got) != 0 {
		t.Errorf("Batches after a failed write = %v", got)
	}

	// A process killed before the rename leaves its temporary file: it is
	// not a batch, and New removes it (and nothing else).
	if err := os.WriteFile(tmpSeen, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Batches(); len(got) != 0 {
		t.Errorf("Batches with a dead write's temporary file = %v", got)
	}
	s.Close() // the dead process's lock goes with it
	s = newSink(t, Config[string]{Dir: dir})
	if diff := cmp.Diff([]string{"notes.txt"}, dirNames(t, dir)); diff != "" {
		t.Errorf("after New (-want +got):\n%s", diff)
	}
	if err := s.Write(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if got := read(t, s.Path(3000)); got != "a\nb\n" {
		t.Errorf("content %q", got)
	}
}

func TestWriteErrors(t *testing.T) {
	s := newSink(t, Config[string]{Encode: func(io.Writer, *batch.Batch[string]) error { return io.ErrShortWrite }})
	if err := s.Write(t.Context(), batch.New(1000, nil, []string{"x"})); !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("Write = %v, want the encoder's error", err)
	}
	if names := dirNames(t, s.cfg.Dir); len(names) != 0 {
		t.Errorf("failed encode left %v", names)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := newSink(t, Config[string]{}).Write(ctx, batch.New(1000, nil, []string{"x"})); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a done ctx = %v", err)
	}
}

// TestFormatPanicLeavesNoFile checks that a Format that panics on a
// record (a poison record, which the pipeline's Retry and Quarantine then
// handle) leaves neither the batch's temporary file nor its descriptor
// open: each try of the batch left both, so a pipeline quarantining such
// records ran out of descriptors, and the directory filled with
// temporary files until the next New.
func TestFormatPanicLeavesNoFile(t *testing.T) {
	s := newSink(t, Config[string]{Format: func(v string) []byte {
		if v == "bad" {
			panic("format bug")
		}
		return []byte(v)
	}})
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return -1 // no /proc: descriptors not counted
		}
		return len(entries)
	}
	before := fds()
	for range 3 { // as the pipeline tries a batch again
		func() {
			defer func() {
				if v := recover(); v != "format bug" {
					t.Errorf("Write panicked with %v, want Format's panic", v)
				}
			}()
			s.Write(t.Context(), batch.New(1000, nil, []string{"ok", "bad"}))
		}()
	}
	if names := dirNames(t, s.cfg.Dir); len(names) != 0 {
		t.Errorf("Format's panics left %v", names)
	}
	if after := fds(); after != before {
		t.Errorf("%d descriptors open after the panics, %d before", after, before)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := New(Config[int]{Prefix: ".tmp-x", Suffix: "a/b", Perm: fs.ModeDir | 0o644,
		Format: func(int) []byte { return nil }, Encode: func(io.Writer, *batch.Batch[int]) error { return nil }})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	want := []string{
		"Dir empty: set the directory to write the files to",
		"Format and Encode both set: Encode writes each batch and Format would be ignored; set one of them",
		`Suffix "a/b": must not contain a path separator; put directories in Dir`,
		`Prefix ".tmp-x": must not start with ".tmp-", which names temporary files`,
		"Perm drw-r--r--: must hold permission bits only, such as 0600",
	}
	got := strings.Split(strings.TrimPrefix(err.Error(), ErrInvalidConfig.Error()+": "), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestNames(t *testing.T) {
	s := newSink(t, Config[int]{})
	for _, name := range []string{"batch-0000000001000.txt", "batch-1.txt", "batch-x.txt", "other", ".tmp-batch-0000000001000.txt.123"} {
		_, ok := s.parse(name)
		if want := name == "batch-0000000001000.txt"; ok != want {
			t.Errorf("parse(%q) ok = %v, want %v", name, ok, want)
		}
	}
	ts := []batch.Time{5, 1700000000000, 99999999999999}
	names := make([]string, len(ts))
	for i, tm := range ts {
		names[i] = s.Name(tm)
	}
	if !slices.IsSorted(names) {
		t.Errorf("names %v do not sort in time order", names)
	}
}

// TestNewNamesDirInErrors checks that a Dir that cannot be created is
// named as the output directory it is (Config.Dir), not as a state
// directory: an application such as examples/wordcount has both.
func TestNewNamesDirInErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config[string]{Dir: filepath.Join(file, "out")})
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "files: Config.Dir: create directory: ") || strings.Contains(err.Error(), "state") {
		t.Errorf("New with Dir under a file: %v, want an error naming Config.Dir", err)
	}
}

// TestNewCreatesNestedDir checks that New creates Dir with its missing
// parents, and that the Sink then writes there.
func TestNewCreatesNestedDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "out")
	s := newSink(t, Config[string]{Dir: dir})
	if err := s.Write(t.Context(), batch.New(1000, nil, []string{"x"})); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := read(t, filepath.Join(dir, "batch-0000000001000.txt")); got != "x\n" {
		t.Errorf("content %q, want %q", got, "x\n")
	}
}

// TestNewRefusesNamesOverTheLimit checks that New refuses a Prefix and
// Suffix so long that a batch's temporary file name would pass the 255-byte
// file-name limit: New accepted them, and every Write then failed. The
// longest accepted pair writes a batch, so the limit is not too strict.
func TestNewRefusesNamesOverTheLimit(t *testing.T) {
	longest := Config[string]{Prefix: strings.Repeat("p", 200), Suffix: strings.Repeat("s", maxAffixes-200)}
	s := newSink(t, longest)
	if err := s.Write(t.Context(), batch.New(1700000000000, nil, []string{"x"})); err != nil {
		t.Fatalf("Write with Prefix and Suffix of %d bytes together: %v", maxAffixes, err)
	}

	tooLong := longest
	tooLong.Dir = t.TempDir()
	tooLong.Suffix += "s"
	s, err := New(tooLong)
	if err == nil {
		s.Close()
	}
	want := fmt.Sprintf("Prefix and Suffix: %d bytes together, must be at most %d", maxAffixes+1, maxAffixes)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "255") {
		t.Errorf("New with Prefix and Suffix of %d bytes: %v, want ErrInvalidConfig saying %q and naming the 255-byte limit", maxAffixes+1, err, want)
	}
}

// TestNewRefusesNULInNames checks that New refuses a Prefix or Suffix
// holding a NUL byte, which no file name can hold: New accepted it, and
// every Write then failed.
func TestNewRefusesNULInNames(t *testing.T) {
	for _, cfg := range []Config[string]{{Prefix: "a\x00"}, {Suffix: "\x00.txt"}} {
		cfg.Dir = t.TempDir()
		s, err := New(cfg)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "NUL") {
			t.Errorf("New with Prefix %q Suffix %q: %v, want ErrInvalidConfig naming the NUL byte", cfg.Prefix, cfg.Suffix, err)
		}
	}
}
