package deadletter_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/sink/deadletter"
	"github.com/weirstream/weir/stream"
)

func letters(t batch.Time, output int, records ...string) []stream.DeadLetter {
	var ls []stream.DeadLetter
	for i, r := range records {
		ls = append(ls, stream.DeadLetter{Time: t, Output: output, OutputName: "ForEach of Map (stream 1)", Index: i,
			Range:  batch.SeqRange{Stream: "s", Shard: "shardId-000000000000", First: "7", Last: "9", Count: 3},
			Offset: i, Record: []byte(r), Encoding: "raw", Err: "panic: boom", Panic: "boom", Stack: "goroutine 1"})
	}
	return ls
}

// TestQuarantineAndLetters checks the round trip, the order of Letters, and
// that a second call for a batch and output replaces the first.
func TestQuarantineAndLetters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dead")
	d, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	for _, call := range [][]stream.DeadLetter{
		letters(2000, 1, "c"),
		letters(1000, 0, "x", "y"),
		letters(2000, 0, "a", "b"),
		letters(1000, 0, "x", "y"), // a recomputed batch: replaces, adds nothing
	} {
		if err := d.Quarantine(ctx, call); err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
	}
	got, err := d.Letters()
	if err != nil {
		t.Fatal(err)
	}
	var want []stream.DeadLetter
	want = append(want, letters(1000, 0, "x", "y")...)
	want = append(want, letters(2000, 0, "a", "b")...)
	want = append(want, letters(2000, 1, "c")...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Letters (-want +got):\n%s", diff)
	}
	read, err := deadletter.Read(dir) // while d holds the lock
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, read); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if _, err := deadletter.Read(filepath.Join(dir, "missing")); err == nil {
		t.Error("Read of a missing directory = nil, want an error")
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(filepath.Join(dir, "letters-0000000001000-000.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("letter file mode %v, want the owner's only", m)
		}
	}
	mixed := append(letters(1000, 0, "x"), letters(1000, 1, "y")...)
	if err := d.Quarantine(ctx, mixed); err == nil {
		t.Error("Quarantine of two outputs' letters in one call = nil, want an error")
	}
}

// TestOpenLocks checks that a directory has one Dir at a time (in
// virtual time, as the second Open waits DefaultLockWait first).
func TestOpenLocks(t *testing.T) { synctest.Test(t, testOpenLocks) }

func testOpenLocks(t *testing.T) {
	dir := t.TempDir()
	d, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deadletter.Open(dir); !errors.Is(err, deadletter.ErrLocked) {
		t.Errorf("second Open = %v, want ErrLocked", err)
	}
	d.Close()
	d2, err := deadletter.Open(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	d2.Close()
	if err := d2.Quarantine(context.Background(), letters(1, 0, "x")); !errors.Is(err, deadletter.ErrClosed) {
		t.Errorf("Quarantine after Close = %v, want ErrClosed", err)
	}
}

// TestQuarantineManyLettersStreams checks that Quarantine writes a batch's
// letters to their file as it encodes them, without first holding the
// whole file in memory: when every record of a big batch fails, the file
// holds the failure's stack once per record.
func TestQuarantineManyLettersStreams(t *testing.T) {
	const n, stackBytes = 10_000, 8 << 10
	stack := strings.Repeat("s", stackBytes)
	ls := make([]stream.DeadLetter, n)
	for i := range ls {
		ls[i] = stream.DeadLetter{Time: 1000, Index: i, Record: []byte("r"), Encoding: "raw", Err: "panic: boom", Panic: "boom", Stack: stack}
	}
	d, err := deadletter.Open(filepath.Join(t.TempDir(), "dead"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := d.Quarantine(t.Context(), ls); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	t.Logf("allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
	// Made in memory, the file takes its size in a buffer, and more as the
	// buffer doubles. Under the race detector json's encoder also makes a
	// buffer of a letter's size for most letters (its pool drops them), a
	// letter's size each but garbage at once.
	most := uint64(n * stackBytes / 4)
	if raceOn {
		most = uint64(n * stackBytes * 5 / 4)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > most {
		t.Errorf("Quarantine of %d letters of %d bytes allocated %d bytes, want at most %d: the file is made in memory", n, stackBytes, got, most)
	}
	got, err := d.Letters()
	if err != nil || len(got) != n || got[n-1].Stack != stack {
		t.Fatalf("Letters = %d letters, %v; want %d, with their stack", len(got), err, n)
	}
}

// TestLettersOrderedByOutputNumber checks that Letters and Read return the
// letters by batch time, then output, compared as numbers, for outputs of
// 1,000 and more, whose file names have more digits than the 3 the output
// is padded to ("-1000" sorted by name between "-100" and "-101"), and
// that a file named as earlier releases named it is read.
func TestLettersOrderedByOutputNumber(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dead")
	d, err := deadletter.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	outputs := []int{1000, 101, 2, 100, 10000, 999, 1001}
	for _, out := range outputs {
		if err := d.Quarantine(t.Context(), letters(5000, out, "r")); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Quarantine(t.Context(), letters(4000, 1500, "r")); err != nil {
		t.Fatal(err)
	}
	// An earlier release's name of batch 6000's output 7's letters.
	if err := os.WriteFile(filepath.Join(path, "letters-0000000006000-007.jsonl"),
		[]byte(`{"Time":6000,"Output":7,"Index":0,"Record":"cg==","Encoding":"raw"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := letters(4000, 1500, "r")
	for _, out := range []int{2, 100, 101, 999, 1000, 1001, 10000} {
		want = append(want, letters(5000, out, "r")...)
	}
	want = append(want, stream.DeadLetter{Time: 6000, Output: 7, Record: []byte("r"), Encoding: "raw"})
	got, err := d.Letters()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Letters (-want +got):\n%s", diff)
	}
	read, err := deadletter.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, read); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
}
