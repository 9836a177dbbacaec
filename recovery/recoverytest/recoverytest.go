// Package recoverytest is the conformance suite every recovery.Log
// implementation passes, and an in-memory log for tests. Run the suite from
// a test of an implementation, or of a wrapper around one:
//
//	func TestConformance(t *testing.T) {
//		recoverytest.Run(t, func(t *testing.T) recovery.Opener {
//			return recovery.Dir(t.TempDir())
//		})
//	}
package recoverytest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
)

// NewStore returns an Opener of a fresh, empty log for one test. The suite
// opens it once or more, closing each Log before opening the next.
type NewStore func(t *testing.T) recovery.Opener

// Run runs the conformance suite, each case in its own subtest with its own
// store from newStore: records appended, read back, replaced and reopened as
// they were given, and the driver's use of the log (compaction,
// concurrent appends, snapshots) on top of it.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Records", func(t *testing.T) { testRecords(t, newStore(t)) })
	t.Run("Replace", func(t *testing.T) { testReplace(t, newStore(t)) })
	t.Run("PruneSnapshots", func(t *testing.T) { testPrune(t, newStore(t)) })
	logtest.Run(t, newStore)
}

// Memory returns an empty in-memory log, for tests of pipelines with a
// recovery log (stream.Config.Recovery): what it holds survives closing
// the Log it opened, as a directory survives a process, so a test can stop
// a pipeline and start another on the same log. Only one Log may be open on
// it at a time (recovery.ErrLocked). It keeps snapshots.
func Memory() recovery.Opener { return recoverylog.NewMemory() }

func open(t *testing.T, o recovery.Opener) recovery.Log {
	t.Helper()
	l, err := o.Open(t.Context())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustAppend(t *testing.T, l recovery.Log, records ...[]byte) {
	t.Helper()
	if err := l.Append(t.Context(), records...); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func check(t *testing.T, l recovery.Log, want [][]byte) {
	t.Helper()
	got, err := l.Read(t.Context())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Read %d records, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func closeLog(t *testing.T, l recovery.Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// records returns n records of UTF-8 text, as the driver writes, with
// characters JSON escapes, different from those of another tag.
func records(tag string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"tag":%q,"n":%d,"text":"\\u00e9 \"q\" é 🙂 \t"}`, tag, i)
	}
	return out
}

// testRecords appends records in appends of several sizes, and reads them back as given, before and after a
// reopen; a Read's records are the caller's.
func testRecords(t *testing.T, o recovery.Opener) {
	l := open(t, o)
	check(t, l, nil)
	want := records("a", 5)
	mustAppend(t, l, want[0])
	mustAppend(t, l)
	mustAppend(t, l, want[1:4]...)
	mustAppend(t, l, want[4])
	got, err := l.Read(t.Context())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	got[0][0] ^= 0xff
	check(t, l, want)
	closeLog(t, l)
	l = open(t, o)
	check(t, l, want)
}

// testReplace replaces the records, appends after, reopens, replaces with
// none, and checks that Replace after Close fails with ErrClosed.
func testReplace(t *testing.T, o recovery.Opener) {
	l := open(t, o)
	mustAppend(t, l, records("old", 4)...)
	want := records("new", 2)
	if err := l.Replace(t.Context(), want); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	check(t, l, want)
	more := records("more", 1)
	mustAppend(t, l, more...)
	want = append(want, more...)
	check(t, l, want)
	closeLog(t, l)
	l = open(t, o)
	check(t, l, want)
	if err := l.Replace(t.Context(), nil); err != nil {
		t.Fatalf("Replace with no records: %v", err)
	}
	check(t, l, nil)
	closeLog(t, l)
	if err := l.Replace(t.Context(), want); !errors.Is(err, recovery.ErrClosed) {
		t.Errorf("Replace after Close: got %v, want ErrClosed", err)
	}
	l = open(t, o)
	check(t, l, nil)
}

// testPrune puts snapshots at three times and prunes those older than the
// second, which stays, as does the third.
func testPrune(t *testing.T, o recovery.Opener) {
	l := open(t, o)
	ss, ok := l.(recovery.SnapshotStore)
	if !ok {
		t.Skipf("%T does not implement recovery.SnapshotStore: its pipelines cannot keep state across restarts", l)
	}
	ctx := t.Context()
	var refs []string
	for _, tm := range []int64{1000, 2000, 3000} {
		ref, err := ss.PutSnapshot(ctx, batch.Time(tm), records("snap", 1)[0])
		if err != nil {
			t.Fatalf("PutSnapshot: %v", err)
		}
		refs = append(refs, ref)
	}
	if err := ss.PruneSnapshots(ctx, 2000, refs[1]); err != nil {
		t.Fatalf("PruneSnapshots: %v", err)
	}
	if _, err := ss.GetSnapshot(ctx, refs[0]); !errors.Is(err, recovery.ErrNoSnapshot) {
		t.Errorf("the snapshot before the current one after PruneSnapshots: got %v, want ErrNoSnapshot", err)
	}
	for _, ref := range refs[1:] {
		got, err := ss.GetSnapshot(ctx, ref)
		if err != nil || !bytes.Equal(got, records("snap", 1)[0]) {
			t.Errorf("GetSnapshot(%q) after PruneSnapshots = %q, %v; want the snapshot put", ref, got, err)
		}
	}
}
