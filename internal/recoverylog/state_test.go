package recoverylog_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/internal/recoverylog/logtest"
	"github.com/weirstream/weir/recovery"
)

var (
	block   = logtest.Block
	blockIn = logtest.BlockIn
	id      = logtest.ID
)

func info(src int, seq uint64) batch.BlockInfo { return block(src, seq).Block }

func TestRecover(t *testing.T) {
	shape := logtest.SampleShape()
	other := recovery.Shape{Sources: []recovery.Component{{Kind: "memory"}}}
	tests := []struct {
		name    string
		entries []recoverylog.Entry
		want    *recoverylog.State
	}{
		{
			name:    "empty",
			entries: nil,
			want:    &recoverylog.State{},
		},
		{
			name:    "stored blocks are unallocated, in ID order",
			entries: []recoverylog.Entry{block(1, 0), block(0, 5), block(0, 2)},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					NextBlockSeq: map[int]uint64{0: 6, 1: 1},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "510", {"s", "shard-1"}: "10"},
				},
				Unallocated: []batch.BlockInfo{info(0, 2), info(0, 5), info(1, 0)},
			},
		},
		{
			name: "allocated batches are pending in time order, blocks in batch order",
			entries: []recoverylog.Entry{
				block(0, 0), block(0, 1), block(0, 2),
				recoverylog.BatchAllocated(2000, id(0, 2)),
				recoverylog.BatchAllocated(1000, id(0, 1), id(0, 0)),
			},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					NextBlockSeq: map[int]uint64{0: 3},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "210"},
				},
				Pending: []recoverylog.PendingBatch{
					{Time: 1000, Blocks: []batch.BlockInfo{info(0, 1), info(0, 0)}},
					{Time: 2000, Blocks: []batch.BlockInfo{info(0, 2)}},
				},
			},
		},
		{
			name: "completed batches drop out, keeping progress",
			entries: []recoverylog.Entry{
				block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)),
				block(0, 1), recoverylog.BatchAllocated(2000, id(0, 1)),
				recoverylog.BatchCompleted(1000), block(0, 2),
			},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					LastCompleted: 1000, HasCompleted: true,
					NextBlockSeq: map[int]uint64{0: 3},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "210"},
				},
				Pending:     []recoverylog.PendingBatch{{Time: 2000, Blocks: []batch.BlockInfo{info(0, 1)}}},
				Unallocated: []batch.BlockInfo{info(0, 2)},
			},
		},
		{
			name: "out-of-order completion, empty batch at time 0",
			entries: []recoverylog.Entry{
				recoverylog.BatchAllocated(0), block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)),
				recoverylog.BatchAllocated(2000), recoverylog.BatchCompleted(2000),
			},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					LastCompleted: 2000, HasCompleted: true,
					NextBlockSeq: map[int]uint64{0: 1},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "10"},
				},
				Pending: []recoverylog.PendingBatch{{Time: 0}, {Time: 1000, Blocks: []batch.BlockInfo{info(0, 0)}}},
			},
		},
		{
			name: "repeated entries still in effect have no effect",
			entries: []recoverylog.Entry{
				block(0, 0), block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)),
				block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)),
			},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					NextBlockSeq: map[int]uint64{0: 1},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "10"},
				},
				Pending: []recoverylog.PendingBatch{{Time: 1000, Blocks: []batch.BlockInfo{info(0, 0)}}},
			},
		},
		{
			name: "blocks logged in a batch make it pending, in ID order",
			entries: []recoverylog.Entry{
				blockIn(1, 0, 2000), blockIn(0, 1, 2000), blockIn(0, 0, 1000), block(0, 2), blockIn(1, 0, 2000),
			},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					NextBlockSeq: map[int]uint64{0: 3, 1: 1},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "210", {"s", "shard-1"}: "10"},
				},
				Pending: []recoverylog.PendingBatch{
					{Time: 1000, Blocks: []batch.BlockInfo{info(0, 0)}},
					{Time: 2000, Blocks: []batch.BlockInfo{info(0, 1), info(1, 0)}},
				},
				Unallocated: []batch.BlockInfo{info(0, 2)},
			},
		},
		{
			// A compaction writes a pending batch's allocation, and blocks
			// are logged in it after; a restart's first batch allocates
			// the unallocated blocks with those logged in it.
			name: "blocks logged in a batch and its allocations add up",
			entries: []recoverylog.Entry{
				blockIn(0, 0, 1000), recoverylog.BatchCompleted(1000),
				block(0, 1), recoverylog.BatchAllocated(2000, id(0, 1)), blockIn(0, 2, 2000),
				block(0, 3), blockIn(0, 4, 3000), recoverylog.BatchAllocated(3000, id(0, 3), id(0, 4)), blockIn(0, 4, 3000),
			},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					LastCompleted: 1000, HasCompleted: true,
					NextBlockSeq: map[int]uint64{0: 5},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "410"},
				},
				Pending: []recoverylog.PendingBatch{
					{Time: 2000, Blocks: []batch.BlockInfo{info(0, 1), info(0, 2)}},
					{Time: 3000, Blocks: []batch.BlockInfo{info(0, 3), info(0, 4)}},
				},
			},
		},
		{
			name: "a batch kept for replay, its blocks logged in it",
			entries: []recoverylog.Entry{
				recoverylog.SnapshotTaken(0, ""), blockIn(0, 0, 1000), recoverylog.BatchCompleted(1000), blockIn(0, 0, 1000),
			},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					LastCompleted: 1000, HasCompleted: true,
					NextBlockSeq: map[int]uint64{0: 1},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "10"},
				},
				Snapshot: &recoverylog.SnapshotRef{},
				Replay:   []recoverylog.PendingBatch{{Time: 1000, Blocks: []batch.BlockInfo{info(0, 0)}}},
			},
		},
		{
			name:    "last shape wins",
			entries: []recoverylog.Entry{recoverylog.ShapeRecorded(other), recoverylog.ShapeRecorded(shape)},
			want:    &recoverylog.State{Shape: &shape},
		},
		{
			name: "summaries fold as maxima, sequence numbers compared as numbers",
			entries: []recoverylog.Entry{
				{Kind: recoverylog.KindSummary, Summary: recoverylog.Progress{
					LastCompleted: 5000, HasCompleted: true,
					NextBlockSeq: map[int]uint64{0: 10, 2: 4},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "9"},
				}},
				block(0, 3),
				{Kind: recoverylog.KindSummary, Summary: recoverylog.Progress{
					LastCompleted: 3000, HasCompleted: true,
					ShardSeqs: map[recoverylog.ShardKey]string{{"s", "shard-0"}: "100"},
				}},
			},
			want: &recoverylog.State{
				Progress: recoverylog.Progress{
					LastCompleted: 5000, HasCompleted: true,
					NextBlockSeq: map[int]uint64{0: 10, 2: 4},
					ShardSeqs:    map[recoverylog.ShardKey]string{{"s", "shard-0"}: "310"},
				},
				Unallocated: []batch.BlockInfo{info(0, 3)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := recoverylog.Recover(tt.entries)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, logtest.EquateEmpty()); diff != "" {
				t.Fatalf("State mismatch (-want +got):\n%s", diff)
			}
			// The compacted form recovers to the same state and is a
			// fixed point of compaction.
			compacted := got.Entries()
			again, err := recoverylog.Recover(compacted)
			if err != nil {
				t.Fatalf("Recover(Entries()): %v", err)
			}
			if diff := cmp.Diff(tt.want, again, logtest.EquateEmpty()); diff != "" {
				t.Fatalf("State of Entries() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(compacted, again.Entries(), logtest.EquateEmpty()); diff != "" {
				t.Fatalf("Entries() not a fixed point (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecoverInconsistent(t *testing.T) {
	tests := []struct {
		name    string
		entries []recoverylog.Entry
		want    string
	}{
		{
			name:    "unknown block",
			entries: []recoverylog.Entry{block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0), id(0, 1))},
			want:    "entries[1] (alloc 1000 ms (1970-01-01T00:00:01Z) [block-0-0 block-0-1]): block block-0-1 was never stored",
		},
		{
			name:    "complete unallocated",
			entries: []recoverylog.Entry{recoverylog.BatchCompleted(1000)},
			want:    "entries[0] (complete 1000 ms (1970-01-01T00:00:01Z)): batch 1000 ms (1970-01-01T00:00:01Z) completed but it is not allocated, or already completed",
		},
		{
			name:    "complete twice",
			entries: []recoverylog.Entry{recoverylog.BatchAllocated(1000), recoverylog.BatchCompleted(1000), recoverylog.BatchCompleted(1000)},
			want:    "entries[2]",
		},
		{
			name:    "block stored twice differently",
			entries: []recoverylog.Entry{block(0, 0), recoverylog.BlockStored(batch.BlockInfo{ID: id(0, 0), Count: 3})},
			want:    "block block-0-0 stored twice with different contents",
		},
		{
			name: "block stored after its batch completed",
			entries: []recoverylog.Entry{block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)),
				recoverylog.BatchCompleted(1000), block(0, 0)},
			want: "entries[3] (block block-0-0 (1 ranges, 10 records)): block block-0-0 stored again after the batch holding it completed",
		},
		{
			name: "block of a batch kept for replay stored again differently",
			entries: []recoverylog.Entry{recoverylog.SnapshotTaken(0, ""), block(0, 0),
				recoverylog.BatchAllocated(1000, id(0, 0)), recoverylog.BatchCompleted(1000),
				recoverylog.BlockStored(batch.BlockInfo{ID: id(0, 0), Count: 3})},
			want: "entries[4] (block block-0-0 (0 ranges, 3 records)): block block-0-0 stored again after the batch holding it completed",
		},
		{
			name: "block of a batch a snapshot covers stored again",
			entries: []recoverylog.Entry{recoverylog.SnapshotTaken(0, ""), block(0, 0),
				recoverylog.BatchAllocated(1000, id(0, 0)), recoverylog.BatchCompleted(1000),
				recoverylog.SnapshotTaken(1000, "r"), block(0, 0)},
			want: "entries[5] (block block-0-0 (1 ranges, 10 records)): block block-0-0 stored again after the batch holding it completed",
		},
		{
			name: "batch kept for replay allocated again differently",
			entries: []recoverylog.Entry{recoverylog.SnapshotTaken(0, ""), block(0, 0), block(0, 1),
				recoverylog.BatchAllocated(1000, id(0, 0)), recoverylog.BatchCompleted(1000),
				recoverylog.BatchAllocated(1000, id(0, 0), id(0, 1))},
			want: "entries[5]",
		},
		{
			name: "batch a snapshot covers completed again",
			entries: []recoverylog.Entry{recoverylog.SnapshotTaken(0, ""), recoverylog.BatchAllocated(1000),
				recoverylog.BatchCompleted(1000), recoverylog.SnapshotTaken(1000, "r"), recoverylog.BatchCompleted(1000)},
			want: "entries[4]",
		},
		{
			name: "block in two batches",
			entries: []recoverylog.Entry{block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)),
				recoverylog.BatchAllocated(2000, id(0, 0))},
			want: "block block-0-0 is already in batch 1000 ms",
		},
		{
			name: "block of a completed batch",
			entries: []recoverylog.Entry{block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)),
				recoverylog.BatchCompleted(1000), recoverylog.BatchAllocated(2000, id(0, 0))},
			want: "block block-0-0 is in a batch that already completed",
		},
		{
			name: "batch allocated twice differently",
			entries: []recoverylog.Entry{block(0, 0), recoverylog.BatchAllocated(1000, id(0, 0)),
				recoverylog.BatchAllocated(1000)},
			want: "batch 1000 ms (1970-01-01T00:00:01Z) allocated twice with different blocks",
		},
		{
			name: "batch time not increasing",
			entries: []recoverylog.Entry{recoverylog.BatchAllocated(2000), recoverylog.BatchCompleted(2000),
				recoverylog.BatchAllocated(2000)},
			want: "allocated after batch 2000 ms (1970-01-01T00:00:02Z) completed; batch times must increase",
		},
		{
			name:    "block logged in a completed batch",
			entries: []recoverylog.Entry{blockIn(0, 0, 1000), recoverylog.BatchCompleted(1000), blockIn(0, 1, 1000)},
			want:    "entries[2] (block block-0-1 (1 ranges, 10 records) in batch 1000 ms (1970-01-01T00:00:01Z)): batch 1000 ms (1970-01-01T00:00:01Z) allocated after batch 1000 ms",
		},
		{
			name:    "block logged in two batches",
			entries: []recoverylog.Entry{blockIn(0, 0, 1000), blockIn(0, 0, 2000)},
			want:    "block block-0-0 logged in batch 2000 ms (1970-01-01T00:00:02Z), but it is in batch 1000 ms",
		},
		{
			name:    "block logged in a batch and allocated in another",
			entries: []recoverylog.Entry{blockIn(0, 0, 1000), recoverylog.BatchAllocated(2000, id(0, 0))},
			want:    "block block-0-0 is already in batch 1000 ms",
		},
		{
			name:    "batch allocated without a block logged in it",
			entries: []recoverylog.Entry{blockIn(0, 0, 1000), blockIn(0, 1, 1000), block(0, 2), recoverylog.BatchAllocated(1000, id(0, 0), id(0, 2))},
			want:    "batch 1000 ms (1970-01-01T00:00:01Z) allocated twice with different blocks",
		},
		{
			name:    "block logged in a batch after it completed",
			entries: []recoverylog.Entry{blockIn(0, 0, 1000), recoverylog.BatchCompleted(1000), blockIn(0, 0, 1000)},
			want:    "block block-0-0 stored again after the batch holding it completed",
		},
		{
			name:    "invalid entry",
			entries: []recoverylog.Entry{{Kind: "bogus"}},
			want:    `unknown kind "bogus"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := recoverylog.Recover(tt.entries)
			if !errors.Is(err, recovery.ErrInconsistent) {
				t.Fatalf("Recover: got %v, want ErrInconsistent", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Recover error %q does not contain %q", err, tt.want)
			}
			// It says what to do, as a *recovery.CorruptError does.
			if fix := "restore it from a backup, or delete it to start fresh"; !strings.Contains(err.Error(), fix) {
				t.Fatalf("Recover error %q does not name the fix %q", err, fix)
			}
		})
	}
}

func TestCheckShape(t *testing.T) {
	kin := recovery.Component{Kind: "kinesis", Name: "words"}
	files := recovery.Component{Kind: "ForEachBatch", Name: "files"}
	print := recovery.Component{Kind: "Print"}
	tests := []struct {
		name          string
		was, now      recovery.Shape
		want, wantNot []string
	}{
		{
			name: "same",
			was:  recovery.Shape{Sources: []recovery.Component{kin}, Outputs: []recovery.Component{files, print}},
			now:  recovery.Shape{Sources: []recovery.Component{kin}, Outputs: []recovery.Component{files, print}},
		},
		{
			name:    "output changed",
			was:     recovery.Shape{Sources: []recovery.Component{kin}, Outputs: []recovery.Component{print, files}},
			now:     recovery.Shape{Sources: []recovery.Component{kin}, Outputs: []recovery.Component{print, print}},
			want:    []string{`output 2 was ForEachBatch("files"), now Print`, "deleting the log", "new DynamoDB log name"},
			wantNot: []string{"output 1", "source 1"},
		},
		{
			name: "source renamed, output added and removed",
			was:  recovery.Shape{Sources: []recovery.Component{kin}, Outputs: []recovery.Component{files}},
			now: recovery.Shape{Sources: []recovery.Component{{Kind: "kinesis", Name: "lines"}, kin},
				Outputs: nil},
			want: []string{`source 1 was kinesis("words"), now kinesis("lines")`,
				`source 2 is new: kinesis("words")`, `output 1 was ForEachBatch("files"), now missing`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := recoverylog.CheckShape(tt.was, tt.now)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("CheckShape: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, recovery.ErrShapeChanged) {
				t.Fatalf("CheckShape: got %v, want ErrShapeChanged", err)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("CheckShape error %q does not contain %q", err, s)
				}
			}
			for _, s := range tt.wantNot {
				if strings.Contains(err.Error(), s) {
					t.Errorf("CheckShape error %q contains %q", err, s)
				}
			}
		})
	}
}

func TestStateLastBatch(t *testing.T) {
	tests := []struct {
		name    string
		entries []recoverylog.Entry
		want    batch.Time
		wantOK  bool
	}{
		{"none", nil, 0, false},
		{"pending only", []recoverylog.Entry{recoverylog.BatchAllocated(0)}, 0, true},
		{"completed after pending", []recoverylog.Entry{recoverylog.BatchAllocated(1000), recoverylog.BatchAllocated(2000),
			recoverylog.BatchCompleted(2000)}, 2000, true},
		{"pending after completed", []recoverylog.Entry{recoverylog.BatchAllocated(1000), recoverylog.BatchCompleted(1000),
			recoverylog.BatchAllocated(3000)}, 3000, true},
		{"reserved only", []recoverylog.Entry{recoverylog.BatchesReserved(11000)}, 11000, true},
		{"batches inside a reservation", []recoverylog.Entry{recoverylog.BatchesReserved(11000),
			recoverylog.BatchAllocated(2000), recoverylog.BatchCompleted(2000), recoverylog.BatchAllocated(3000)}, 11000, true},
		{"batches after a reservation", []recoverylog.Entry{recoverylog.BatchesReserved(11000),
			recoverylog.BatchAllocated(12000), recoverylog.BatchCompleted(12000)}, 12000, true},
		{"reservations never go back", []recoverylog.Entry{recoverylog.BatchesReserved(21000),
			recoverylog.BatchesReserved(11000)}, 21000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := recoverylog.Recover(tt.entries)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := st.LastBatch()
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("LastBatch() = %v, %v, want %v, %v", got, ok, tt.want, tt.wantOK)
			}
			// Compaction keeps the reservation.
			again, err := recoverylog.Recover(st.Entries())
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := again.LastBatch(); got != tt.want || ok != tt.wantOK {
				t.Fatalf("after compaction, LastBatch() = %v, %v, want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// shardBlock is a block of source 0 with one range in each of shards
// first to first+n-1 of stream "s".
func shardBlock(seq uint64, first, n int) recoverylog.Entry {
	b := batch.BlockInfo{ID: batch.BlockID{Seq: seq}, Count: n}
	for i := range n {
		b.Ranges = append(b.Ranges, batch.SeqRange{Stream: "s", Shard: shardName(first + i), First: "1", Last: "2", Count: 1})
	}
	return recoverylog.BlockStored(b)
}

func shardName(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// TestShardFinishedPrunesProgress checks that a finished shard leaves the
// progress a log keeps through compaction, and that one logged again comes
// back; also with a snapshot, after which the batch holding the finished
// shards' blocks is kept for a replay, and compaction rewrites its blocks.
func TestShardFinishedPrunesProgress(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot %t", snap), func(t *testing.T) { testShardFinishedPrunesProgress(t, snap) })
	}
}

func testShardFinishedPrunesProgress(t *testing.T, snap bool) {
	var entries []recoverylog.Entry
	if snap {
		entries = append(entries, recoverylog.SnapshotTaken(0, ""))
	}
	entries = append(entries,
		shardBlock(0, 0, 3),
		recoverylog.BatchAllocated(10, id(0, 0)), recoverylog.BatchCompleted(10),
		recoverylog.ShardFinished("s", shardName(0)), recoverylog.ShardFinished("s", shardName(1)),
	)
	st, err := recoverylog.Recover(entries)
	if err != nil {
		t.Fatal(err)
	}
	if snap && len(st.Replay) != 1 {
		t.Fatalf("Replay %v, want batch 10: the test does not test", st.Replay)
	}
	want := map[recoverylog.ShardKey]string{{Stream: "s", Shard: shardName(2)}: "2"}
	if diff := cmp.Diff(want, st.ShardSeqs); diff != "" {
		t.Fatalf("ShardSeqs mismatch (-want +got):\n%s", diff)
	}
	again, err := recoverylog.Recover(st.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, again, logtest.EquateEmpty()); diff != "" {
		t.Fatalf("compacted state mismatch (-want +got):\n%s", diff)
	}
	// The old entries followed by the compacted ones, as a compaction a
	// crash cut short leaves, recover to the same.
	torn, err := recoverylog.Recover(append(slices.Clone(entries), st.Entries()...))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, torn, logtest.EquateEmpty()); diff != "" {
		t.Fatalf("state after a torn compaction mismatch (-want +got):\n%s", diff)
	}
	st, err = recoverylog.Recover(append(entries, shardBlock(1, 0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.ShardSeqs[recoverylog.ShardKey{Stream: "s", Shard: shardName(0)}]; !ok {
		t.Errorf("a shard logged again after it finished is not in ShardSeqs")
	}
}

// TestEntriesSplitsALargeSummary checks that the progress of many shards
// is kept in several summary entries, each small enough for any log, that
// recover to the same state.
func TestEntriesSplitsALargeSummary(t *testing.T) {
	var entries []recoverylog.Entry
	for i := range 5 {
		entries = append(entries, shardBlock(uint64(i), i*1000, 1000),
			recoverylog.BatchAllocated(batch.Time(10*(i+1)), id(0, uint64(i))), recoverylog.BatchCompleted(batch.Time(10*(i+1))))
	}
	st, err := recoverylog.Recover(entries)
	if err != nil {
		t.Fatal(err)
	}
	compacted := st.Entries()
	if len(compacted) < 2 {
		t.Fatalf("the progress of 5000 shards is in %d entries, want several", len(compacted))
	}
	for _, e := range compacted {
		b, err := recoverylog.EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 100<<10 {
			t.Errorf("%v encodes to %d bytes, want at most 100 KiB", e, len(b))
		}
	}
	again, err := recoverylog.Recover(compacted)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, again, logtest.EquateEmpty()); diff != "" {
		t.Fatalf("compacted state mismatch (-want +got):\n%s", diff)
	}
}

// TestEntriesSplitsALargeBatch checks that a batch of many blocks, pending
// or kept for a replay, is compacted into entries each small enough for a
// DynamoDB log (an allocation naming 20,000 blocks takes over 500 KB, more
// than its items hold), that recover to the same state, also after any
// prefix of them (a compaction a crash cut short).
func TestEntriesSplitsALargeBatch(t *testing.T) {
	const n = 20000
	entries := []recoverylog.Entry{recoverylog.SnapshotTaken(0, "")}
	ids := make([]batch.BlockID, n)
	for i := range n {
		entries = append(entries, block(0, uint64(i)))
		ids[i] = id(0, uint64(i))
	}
	entries = append(entries, recoverylog.BatchAllocated(1000, ids...), recoverylog.BatchCompleted(1000))
	for i := range n {
		entries = append(entries, blockIn(0, uint64(n+i), 2000))
	}
	st, err := recoverylog.Recover(entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Replay) != 1 || len(st.Replay[0].Blocks) != n || len(st.Pending) != 1 || len(st.Pending[0].Blocks) != n {
		t.Fatalf("Replay %d, Pending %d batches; want one of %d blocks each", len(st.Replay), len(st.Pending), n)
	}
	compacted := st.Entries()
	for _, e := range compacted {
		b, err := recoverylog.EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 380<<10 { // dynamolog.MaxEntrySize
			t.Fatalf("an entry of kind %s at %v encodes to %d bytes, more than a DynamoDB log stores in an item", e.Kind, e.Time, len(b))
		}
	}
	again, err := recoverylog.Recover(compacted)
	if err != nil {
		t.Fatal(err)
	}
	if diff := sameState(st, again); diff != "" {
		t.Fatalf("State of Entries() (-want +got):\n%s", diff)
	}
	for cut := 0; cut <= len(compacted); cut += len(compacted)/7 + 1 {
		torn, err := recoverylog.Recover(append(slices.Clone(entries), compacted[:cut]...))
		if err != nil {
			t.Fatalf("the log and %d of its %d compacted entries: %v", cut, len(compacted), err)
		}
		if diff := sameState(st, torn); diff != "" {
			t.Fatalf("the log and %d of its %d compacted entries: State (-want +got):\n%s", cut, len(compacted), diff)
		}
	}
}

// sameState returns the differences of two states, quickly when there are
// none (cmp.Diff takes seconds on states of many blocks).
func sameState(want, got *recoverylog.State) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return cmp.Diff(want, got, logtest.EquateEmpty())
}
