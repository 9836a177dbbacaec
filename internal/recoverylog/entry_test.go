package recoverylog_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
)

func TestEntryRoundTrip(t *testing.T) {
	for _, e := range append(logtest.History(), recoverylog.EmptyRun(15000, 17000, time.Second), recoverylog.BatchesReservedFrom(18000, 28000)) {
		t.Run(e.String(), func(t *testing.T) {
			b, err := recoverylog.EncodeEntry(e)
			if err != nil {
				t.Fatalf("EncodeEntry: %v", err)
			}
			got, err := recoverylog.DecodeEntry(b)
			if err != nil {
				t.Fatalf("DecodeEntry(%s): %v", b, err)
			}
			if diff := cmp.Diff(e, got, logtest.EquateEmpty()); diff != "" {
				t.Fatalf("round trip of %s mismatch (-want +got):\n%s", b, diff)
			}
		})
	}
}

func TestEncodeEntry(t *testing.T) {
	tests := []struct {
		e    recoverylog.Entry
		want string
	}{
		{recoverylog.BatchCompleted(1700000000000), `{"v":1,"kind":"complete","time":1700000000000}`},
		{recoverylog.BatchAllocated(0), `{"v":1,"kind":"alloc","time":0}`},
		{recoverylog.BatchAllocated(5, batch.BlockID{Source: 1, Seq: 2}),
			`{"v":1,"kind":"alloc","time":5,"blocks":[{"source":1,"seq":2}]}`},
		{recoverylog.BlockStored(batch.BlockInfo{ID: batch.BlockID{Seq: 3}, Count: 2,
			Ranges: []batch.SeqRange{{Stream: "s", Shard: "sh", First: "1", Last: "2", Count: 2}}}),
			`{"v":1,"kind":"block","block":{"id":{"source":0,"seq":3},"ranges":[{"stream":"s","shard":"sh","first":"1","last":"2","count":2}],"count":2}}`},
		{recoverylog.ShapeRecorded(recovery.Shape{Sources: []recovery.Component{{Kind: "kinesis", Name: "w"}},
			Outputs: []recovery.Component{{Kind: "Print"}}}),
			`{"v":1,"kind":"shape","shape":{"sources":[{"kind":"kinesis","name":"w"}],"outputs":[{"kind":"Print"}]}}`},
		{recoverylog.Entry{Kind: recoverylog.KindSummary, Summary: recoverylog.Progress{LastCompleted: 7, HasCompleted: true,
			NextBlockSeq: map[int]uint64{1: 2, 0: 9},
			ShardSeqs:    map[recoverylog.ShardKey]string{{"b", "x"}: "5", {"a", "y"}: "6"}}},
			`{"v":1,"kind":"summary","summary":{"lastCompleted":7,"nextBlockSeq":[{"source":0,"next":9},{"source":1,"next":2}],"shardSeqs":[{"stream":"a","shard":"y","seq":"6"},{"stream":"b","shard":"x","seq":"5"}]}}`},
		{recoverylog.BatchesReserved(1700000010000), `{"v":2,"kind":"reserved","time":1700000010000}`},
		{recoverylog.Entry{Kind: recoverylog.KindSummary, Summary: recoverylog.Progress{ReservedThrough: 9}},
			`{"v":2,"kind":"summary","summary":{"reserved":9}}`},
		{recoverylog.BlockStoredIn(batch.BlockInfo{ID: batch.BlockID{Seq: 3}, Count: 0}, 1700000000000),
			`{"v":3,"kind":"block","block":{"id":{"source":0,"seq":3},"count":0},"batch":1700000000000}`},
		{recoverylog.EmptyRun(1700000000200, 1700000010200, 200*time.Millisecond),
			`{"v":4,"kind":"empty","time":1700000000200,"through":1700000010200,"every":200}`},
		{recoverylog.BatchesReservedFrom(1700000000200, 1700000010200),
			`{"v":4,"kind":"reserved","time":1700000010200,"from":1700000000200}`},
		{recoverylog.ShardFinished("s", "shardId-000000000007"),
			`{"v":1,"kind":"finished","shard":{"stream":"s","shard":"shardId-000000000007"}}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.e.Kind), func(t *testing.T) {
			got, err := recoverylog.EncodeEntry(tt.e)
			if err != nil {
				t.Fatalf("EncodeEntry: %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Fatalf("EncodeEntry mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeEntryErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"not JSON", `{"v":1,`, "unexpected end"},
		{"other version", `{"v":5,"kind":"complete","time":1}`, "version 5, this weir reads versions 1 to 4"},
		{"run in version 3", `{"v":3,"kind":"empty","time":1000,"through":2000,"every":200}`, "a run of empty batches, or reserved times' start, in a version-3 entry"},
		{"run's through in another kind", `{"v":3,"kind":"complete","time":1,"through":2}`, "a run of empty batches, or reserved times' start, in a version-3 entry"},
		{"reserved from in version 2", `{"v":2,"kind":"reserved","time":3000,"from":1000}`, "reserved times' start, in a version-2 entry"},
		{"from in a completion", `{"v":4,"kind":"complete","time":3000,"from":1000}`, `"from" in an entry that is not of reserved times`},
		{"reserved from after through", `{"v":4,"kind":"reserved","time":1000,"from":3000}`, "not after through"},
		{"missing run through", `{"v":4,"kind":"empty","time":1000,"every":200}`, `missing "through"`},
		{"missing run interval", `{"v":4,"kind":"empty","time":1000,"through":2000}`, `missing "every"`},
		{"zero run interval", `{"v":4,"kind":"empty","time":1000,"through":2000,"every":0}`, "positive number of milliseconds"},
		{"run ending before it starts", `{"v":4,"kind":"empty","time":2000,"through":1000,"every":200}`, "before the first batch"},
		{"run of too many batches", `{"v":4,"kind":"empty","time":1,"through":100000000,"every":1}`, "a run holds fewer than 100000"},
		{"run at the greatest time", `{"v":4,"kind":"empty","time":9223372036854775000,"through":9223372036854775807,"every":1000}`, "past the greatest batch time"},
		{"block's batch in version 2", `{"v":2,"kind":"block","block":{"id":{"source":0,"seq":3},"count":0},"batch":5}`, "a block's batch in a version-2 entry"},
		{"block's batch 0", `{"v":3,"kind":"block","block":{"id":{"source":0,"seq":3},"count":0},"batch":0}`, "batch time is not 0"},
		{"reserved in version 1", `{"v":1,"kind":"reserved","time":1}`, "reserved batch times in a version-1 entry"},
		{"reserved summary in version 1", `{"v":1,"kind":"summary","summary":{"reserved":1}}`, "reserved batch times in a version-1 entry"},
		{"missing reserved time", `{"v":2,"kind":"reserved"}`, `missing "time"`},
		{"no version", `{"kind":"complete","time":1}`, "version 0"},
		{"unknown kind", `{"v":1,"kind":"nope"}`, `unknown kind "nope"`},
		{"missing time", `{"v":1,"kind":"complete"}`, `missing "time"`},
		{"missing block", `{"v":1,"kind":"block"}`, `missing "block"`},
		{"missing shard", `{"v":1,"kind":"finished"}`, `missing "shard"`},
		{"empty shard", `{"v":1,"kind":"finished","shard":{"stream":"s","shard":""}}`, "empty stream or shard"},
		{"missing shape", `{"v":1,"kind":"shape"}`, `missing "shape"`},
		{"missing summary", `{"v":1,"kind":"summary"}`, `missing "summary"`},
		{"bad range", `{"v":1,"kind":"block","block":{"id":{"source":0,"seq":1},"ranges":[{"stream":"s","shard":"x","first":"9","last":"1","count":1}],"count":1}}`, "first is after last"},
		{"negative source", `{"v":1,"kind":"alloc","time":1,"blocks":[{"source":-1,"seq":1}]}`, "source index must be >= 0"},
		{"duplicate block", `{"v":1,"kind":"alloc","time":1,"blocks":[{"source":0,"seq":1},{"source":0,"seq":1}]}`, "appears twice"},
		{"empty component kind", `{"v":1,"kind":"shape","shape":{"sources":[{"kind":""}]}}`, "source 1: empty kind"},
		{"bad summary seq", `{"v":1,"kind":"summary","summary":{"shardSeqs":[{"stream":"s","shard":"x","seq":"01"}]}}`, "leading zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := recoverylog.DecodeEntry([]byte(tt.in))
			if !errors.Is(err, recoverylog.ErrInvalidEntry) {
				t.Fatalf("DecodeEntry: got %v, want ErrInvalidEntry", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeEntry error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func FuzzDecodeEntry(f *testing.F) {
	for _, e := range logtest.History() {
		b, err := recoverylog.EncodeEntry(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"kind":"alloc","time":-1,"blocks":null}`))
	f.Add([]byte(`{"v":4,"kind":"empty","time":1000,"through":3000,"every":1000}`))
	f.Add([]byte(`{"v":4,"kind":"empty","time":9223372036854775000,"through":9223372036854775807,"every":1000}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := recoverylog.DecodeEntry(b)
		if err != nil {
			return
		}
		// A restart recovers from it (or refuses it) without panicking or
		// hanging, and its compacted log recovers to the same State.
		if st, err := recoverylog.Recover([]recoverylog.Entry{e}); err == nil {
			again, err := recoverylog.Recover(st.Entries())
			if err != nil {
				t.Fatalf("Recover(Entries()) of the State of %v: %v", e, err)
			}
			if diff := cmp.Diff(st, again, logtest.EquateEmpty()); diff != "" {
				t.Fatalf("State of Entries() of %v (-want +got):\n%s", e, diff)
			}
		}
		// Whatever decodes re-encodes, and decodes again to the same entry.
		b2, err := recoverylog.EncodeEntry(e)
		if err != nil {
			t.Fatalf("EncodeEntry of decoded %v: %v", e, err)
		}
		e2, err := recoverylog.DecodeEntry(b2)
		if err != nil {
			t.Fatalf("DecodeEntry of re-encoded %s: %v", b2, err)
		}
		if diff := cmp.Diff(e, e2, logtest.EquateEmpty()); diff != "" {
			t.Fatalf("re-decode mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestDecodeEntriesNewerVersion checks what an older weir says of a log a
// newer one wrote (a rollback): not that the log is corrupt and should be
// restored or deleted, which would drop its pending batches, but that a
// newer weir wrote it and must read it.
func TestDecodeEntriesNewerVersion(t *testing.T) {
	complete, err := recoverylog.EncodeEntry(recoverylog.BatchCompleted(1000))
	if err != nil {
		t.Fatal(err)
	}
	newer := fmt.Appendf(nil, `{"v":%d,"kind":"complete","time":2000}`, recoverylog.Version+1)
	_, err = recoverylog.DecodeEntries([][]byte{complete, newer})
	switch {
	case err == nil:
		t.Fatal("DecodeEntries of an entry of a newer version: no error")
	case errors.Is(err, recovery.ErrCorrupt):
		t.Errorf("DecodeEntries of an entry of a newer version: %v; want no ErrCorrupt, the log is not damaged", err)
	case !errors.Is(err, recoverylog.ErrNewerVersion):
		t.Errorf("DecodeEntries of an entry of a newer version: %v; want ErrNewerVersion", err)
	}
	for _, want := range []string{"entries[1]", fmt.Sprintf("version %d", recoverylog.Version+1), "newer weir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "delete") {
		t.Errorf("error %q advises deleting the log", err)
	}
}
