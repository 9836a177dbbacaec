package files

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

func TestSecondSinkOnADirFails(t *testing.T) {
	dir := t.TempDir()
	first := newSink(t, Config[string]{Dir: dir})
	if _, err := New(Config[string]{Dir: dir, LockWait: -1}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second New on %s: got %v, want ErrLocked naming the directory", dir, err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Write(t.Context(), batch.New(1000, nil, []string{"x"})); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: got %v, want ErrClosed", err)
	}
	second := newSink(t, Config[string]{Dir: dir}) // the lock went with Close
	if err := second.Write(t.Context(), batch.New(1000, nil, []string{"x"})); err != nil {
		t.Fatal(err)
	}
}

// lockHelperEnv makes the test binary, started by
// TestSecondProcessOnADirFails, open a Sink on the directory it names and
// report the result.
const lockHelperEnv = "WEIR_FILES_LOCK_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(umaskHelperEnv); dir != "" {
		umaskHelper(dir)
		os.Exit(0)
	}
	if dir := os.Getenv(lockHelperEnv); dir != "" {
		_, err := New(Config[string]{Dir: dir, LockWait: -1})
		switch {
		case errors.Is(err, ErrLocked):
			fmt.Println("locked")
		case err != nil:
			fmt.Println("error:", err)
		default:
			fmt.Println("opened")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSecondProcessOnADirFails checks that a Sink in another process
// cannot open a directory this one has, and can once it is closed.
func TestSecondProcessOnADirFails(t *testing.T) {
	dir := t.TempDir()
	other := func() string {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper process: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	s := newSink(t, Config[string]{Dir: dir})
	if got := other(); got != "locked" {
		t.Errorf("another process's New while this one holds %s: %q, want locked", dir, got)
	}
	s.Close()
	if got := other(); got != "opened" {
		t.Errorf("another process's New after Close: %q, want opened", got)
	}
}

// writeBatches writes a batch of one record at each of times, in order, and
// returns the batch times whose files are left.
func writeBatches(t *testing.T, s *Sink[string], times ...batch.Time) []batch.Time {
	t.Helper()
	for _, bt := range times {
		if err := s.Write(t.Context(), batch.New(bt, nil, []string{"x"})); err != nil {
			t.Fatal(err)
		}
	}
	left, err := s.Batches()
	if err != nil {
		t.Fatal(err)
	}
	return left
}

func TestRetention(t *testing.T) {
	// Batches 100 s apart, more than rerunSpan: retention keeps the batch
	// before the newest (a restart may run it again), and applies Keep and
	// MaxAge to the others.
	tests := []struct {
		name   string
		keep   int
		maxAge time.Duration
		want   []batch.Time
	}{
		{"keep all", 0, -1, []batch.Time{100_000, 200_000, 300_000, 400_000, 500_000}},
		{"default: a day", 0, 0, []batch.Time{100_000, 200_000, 300_000, 400_000, 500_000}},
		{"keep 2", 2, 0, []batch.Time{400_000, 500_000}},
		{"keep 1 keeps the batch before too", 1, 0, []batch.Time{400_000, 500_000}},
		{"max age 200s", 0, 200 * time.Second, []batch.Time{300_000, 400_000, 500_000}},
		{"max age 50s keeps the newest and the batch before", 0, 50 * time.Second, []batch.Time{400_000, 500_000}},
		{"both: the stricter wins", 4, 150 * time.Second, []batch.Time{400_000, 500_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSink(t, Config[string]{Keep: tt.keep, MaxAge: tt.maxAge})
			got := writeBatches(t, s, 100_000, 200_000, 300_000, 400_000, 500_000)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("batches kept (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefaultRetention checks that a Sink configured with no retention
// keeps the files of the last DefaultMaxAge of batch times, and that
// setting Keep, or a negative MaxAge, replaces that default.
func TestDefaultRetention(t *testing.T) {
	const h = batch.Time(time.Hour / time.Millisecond)
	written := []batch.Time{1000, 1 * h, 23 * h, 25 * h, 48 * h}
	tests := []struct {
		name   string
		keep   int
		maxAge time.Duration
		want   []batch.Time
	}{
		{"default", 0, 0, []batch.Time{25 * h, 48 * h}},
		{"Keep set: no age limit", 4, 0, []batch.Time{1 * h, 23 * h, 25 * h, 48 * h}},
		{"MaxAge negative: keep every file", 0, -1, written},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSink(t, Config[string]{Keep: tt.keep, MaxAge: tt.maxAge})
			got := writeBatches(t, s, written...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("batches kept (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetentionKeepsTheBatchWritten checks that a Write removes only files
// of batches before its own, those a pipeline has completed: a batch written
// after a later one (a pipeline restarted without a recovery log after its
// clock stepped back) keeps its file, however old it is.
func TestRetentionKeepsTheBatchWritten(t *testing.T) {
	const h = batch.Time(time.Hour / time.Millisecond)
	s := newSink(t, Config[string]{Keep: 1})
	got := writeBatches(t, s, 100*h, 1*h)
	if diff := cmp.Diff([]batch.Time{1 * h, 100 * h}, got); diff != "" {
		t.Errorf("batches kept (-want +got):\n%s", diff)
	}
}

func TestRetentionLeavesOtherFiles(t *testing.T) {
	s := newSink(t, Config[string]{Keep: 1})
	if err := os.WriteFile(s.cfg.Dir+"/notes.txt", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writeBatches(t, s, 100_000, 200_000, 300_000)
	if diff := cmp.Diff([]string{"batch-0000000200000.txt", "batch-0000000300000.txt", "notes.txt"}, dirNames(t, s.cfg.Dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestRetentionConfigErrors(t *testing.T) {
	_, err := New(Config[string]{Dir: t.TempDir(), Keep: -1})
	for _, want := range []string{"Keep -1: must be >= 0"} {
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want ErrInvalidConfig saying %q", err, want)
		}
	}
}

// TestRetentionAfterRestart checks that retention removes the files a
// previous Sink on the directory wrote, not only its own.
func TestRetentionAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s := newSink(t, Config[string]{Dir: dir, MaxAge: -1})
	writeBatches(t, s, 100_000, 200_000, 300_000)
	s.Close()
	writeBatches(t, newSink(t, Config[string]{Dir: dir, Keep: 2}), 400_000)
	if diff := cmp.Diff([]string{"batch-0000000300000.txt", "batch-0000000400000.txt"}, dirNames(t, dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// TestRetentionAfterFailedDirSync checks that a file whose rename was done
// but whose directory sync failed is removed by retention in its turn: the
// Write retried after the failure (which only syncs the directory again)
// records it, so it is not left behind, unknown to retention, until a
// restart reads the directory again.
func TestRetentionAfterFailedDirSync(t *testing.T) {
	dir := t.TempDir()
	s := newSink(t, Config[string]{Dir: dir, Keep: 1})
	ctx := t.Context()
	writeBatches(t, s, 100_000)
	boom := errors.New("injected: directory sync failed")
	s.syncAfterRename = func() error { return boom }
	b := batch.New(200_000, nil, []string{"x"})
	if err := s.Write(ctx, b); !errors.Is(err, boom) {
		t.Fatalf("Write with a failing directory sync = %v, want %v", err, boom)
	}
	s.syncAfterRename = nil
	if err := s.Write(ctx, b); err != nil {
		t.Fatalf("Write retried: %v", err)
	}
	// The batch before the newest is kept too (a restart may run it again).
	writeBatches(t, s, 300_000, 400_000)
	if diff := cmp.Diff([]string{"batch-0000000300000.txt", "batch-0000000400000.txt"}, dirNames(t, dir)); diff != "" {
		t.Errorf("files kept with Keep 1 (-want +got):\n%s", diff)
	}
}

// TestRetentionKeepsBatchesARestartRunsAgain checks that retention never
// removes the file of a batch a restart may run again: a stateful pipeline
// idle for a while logs its empty batches in a run of up to 10 s, whose
// batches complete only when a later entry says so, and a crash runs all
// of them again (DESIGN.md, G3), each with its time and output as before,
// and the batch after the run as well. With Keep 1, a run of 1 s batches
// from 1 s to 11 s, then the batch at 12 s, a restart that runs them again
// must find every file and write none: a file removed and written again is
// a batch delivered twice.
func TestRetentionKeepsBatchesARestartRunsAgain(t *testing.T) {
	dir := t.TempDir()
	var run []batch.Time
	for ts := batch.Time(1000); ts <= 12000; ts += 1000 {
		run = append(run, ts)
	}
	first := newSink(t, Config[string]{Dir: dir, Keep: 1})
	writeBatches(t, first, run...)
	first.Close()
	written := map[batch.Time]os.FileInfo{}
	for _, ts := range run {
		if fi, err := os.Stat(first.Path(ts)); err == nil {
			written[ts] = fi
		}
	}
	again := newSink(t, Config[string]{Dir: dir, Keep: 1})
	for _, ts := range run {
		if err := again.Write(t.Context(), batch.New(ts, nil, []string{"x"})); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(again.Path(ts))
		if err != nil || written[ts] == nil || !os.SameFile(fi, written[ts]) {
			t.Errorf("batch %v run again after a restart: its file is not the first run's (removed by retention, then written again)", ts)
		}
	}
}
