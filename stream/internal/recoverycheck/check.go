// Package recoverycheck checks what a pipeline did across a crash and a
// restart against the recovery guarantees (DESIGN.md, G1 to G3): the tests
// of the driver on the memory source and on local Kinesis share it.
package recoverycheck

import (
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/sink/files"
	"github.com/weirstream/weir/stream"
)

// Seen is what an output saw of a batch.
type Seen struct {
	Blocks    []batch.BlockID
	Ranges    []batch.SeqRange
	Records   []string
	Recovered bool
}

// Recorder records one run of a pipeline: the batches an output saw (it
// calls See), in order, and, as a Listener of the run, which of them
// completed. It is safe for concurrent use.
type Recorder struct {
	stream.NopListener
	mu        sync.Mutex
	order     []batch.Time
	saw       map[batch.Time]Seen
	completed map[batch.Time]bool
	recovered map[batch.Time]bool
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{saw: map[batch.Time]Seen{}, completed: map[batch.Time]bool{}, recovered: map[batch.Time]bool{}}
}

// BatchStarted notes whether the batch was recovered.
func (l *Recorder) BatchStarted(b stream.BatchInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recovered[b.Time] = b.Recovered
}

// BatchCompleted notes a completed batch.
func (l *Recorder) BatchCompleted(b stream.BatchInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.Err == nil {
		l.completed[b.Time] = true
	}
}

// Completed returns the times of the batches that completed, in order.
func (l *Recorder) Completed() []batch.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.completed))
}

// Saw returns what the output saw, by batch time.
func (l *Recorder) Saw() map[batch.Time]Seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.saw)
}

// See records what an output saw of b.
func (l *Recorder) See(b *batch.Batch[string]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.order = append(l.order, b.Time())
	l.saw[b.Time()] = Seen{Blocks: b.BlockIDs(), Ranges: b.Ranges(), Records: b.Records(), Recovered: l.recovered[b.Time()]}
}

// Check checks, after a first run of a pipeline crashed leaving the log in
// state st1 and a second run of the same pipeline on the same log drained
// leaving it in state st2, that:
//   - the second run ran st1's pending batches first, with their logged
//     blocks, reported as recovered;
//   - its first new batch starts with st1's unallocated blocks and comes
//     after every logged batch time, and new block IDs of source 0 continue
//     the logged numbering;
//   - G2: a batch both runs saw has the same blocks, ranges and records;
//   - G3: the batches both runs saw are exactly those of the first run that
//     st1 holds as pending (started, not completed);
//   - G1, exactly: the records of the completed batches are produced, each
//     once;
//   - st2 has nothing pending or unallocated;
//   - every new batch of the second run comes after every batch the first
//     run saw;
//   - if out is not "", the files sink in out holds one file per batch seen
//     (but an empty one the crash interrupted, which does not run again),
//     with its records.
//
// rl1 and rl2 record the first output of each run; produced lists every
// record put on the stream.
func Check(t testing.TB, st1, st2 *recoverylog.State, rl1, rl2 *Recorder, produced []string, out string) {
	t.Helper()
	pending := map[batch.Time]recoverylog.PendingBatch{}
	for _, p := range st1.Pending {
		pending[p.Time] = p
	}
	if len(rl1.saw) == 0 {
		t.Fatal("the first run saw no batch: the test does not test")
	}

	// The recovered batches run first, in order, with their logged blocks.
	for i, p := range st1.Pending {
		if i >= len(rl2.order) || rl2.order[i] != p.Time {
			t.Fatalf("second run's batches %v, want the pending %v first", rl2.order, st1.Pending)
		}
		if diff := cmp.Diff(p.IDs(), rl2.saw[p.Time].Blocks, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("recovered batch %v blocks (-log +got):\n%s", p.Time, diff)
		}
		if !rl2.recovered[p.Time] { // listener events are all delivered once Run returned
			t.Errorf("batch %v not reported Recovered", p.Time)
		}
	}
	// Then the unallocated blocks, in the first new batch, after every
	// logged batch time.
	last, _ := st1.LastBatch()
	if n := len(st1.Pending); n < len(rl2.order) {
		first := rl2.order[n]
		if first <= last {
			t.Errorf("first new batch %v, not after the last logged batch %v", first, last)
		}
		got := rl2.saw[first].Blocks
		want := make([]batch.BlockID, len(st1.Unallocated))
		for i, b := range st1.Unallocated {
			want[i] = b.ID
		}
		if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Errorf("first new batch %v has blocks %v, want the unallocated %v first", first, got, want)
		}
	}
	// New batch times come after every batch time the first run's outputs
	// saw, logged or not (an empty batch of a stateless pipeline is only
	// covered by a reservation of batch times).
	seen1 := slices.Collect(maps.Keys(rl1.saw))
	for _, tm := range rl2.order {
		if _, ok := pending[tm]; !ok && len(seen1) > 0 && tm <= slices.Max(seen1) {
			t.Errorf("new batch %v, not after the first run's batch %v", tm, slices.Max(seen1))
		}
	}
	// Block IDs continue the logged numbering.
	for _, tm := range rl2.order {
		if _, ok := pending[tm]; ok {
			continue
		}
		for _, id := range rl2.saw[tm].Blocks {
			if id.Seq < st1.NextBlockSeq[0] && !slices.ContainsFunc(st1.Unallocated, func(b batch.BlockInfo) bool { return b.ID == id }) {
				t.Errorf("new batch %v has block %v, reusing a logged number (next was %d)", tm, id, st1.NextBlockSeq[0])
			}
		}
	}

	// G2 and G3.
	var twice, wantTwice []batch.Time
	for tm, s1 := range rl1.saw {
		if _, ok := pending[tm]; ok {
			wantTwice = append(wantTwice, tm)
		}
		s2, ok := rl2.saw[tm]
		if !ok {
			continue
		}
		twice = append(twice, tm)
		s1.Recovered, s2.Recovered = false, false
		if diff := cmp.Diff(s1, s2, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("batch %v differs after the restart (-first run +second run):\n%s", tm, diff)
		}
	}
	slices.Sort(twice)
	slices.Sort(wantTwice)
	if diff := cmp.Diff(wantTwice, twice, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("batches run twice (-started and not completed +got):\n%s", diff)
	}

	t.Logf("first run saw %d batches; the log held %d pending batches and %d unallocated blocks; %d batches ran twice; %d records",
		len(rl1.saw), len(st1.Pending), len(st1.Unallocated), len(twice), len(produced))

	// G1, exactly: every record in one completed batch.
	var got []string
	for tm, s := range rl1.saw {
		if _, ok := pending[tm]; !ok {
			got = append(got, s.Records...)
		}
	}
	for tm, s := range rl2.saw {
		if !rl2.completed[tm] {
			t.Errorf("second run: batch %v not completed", tm)
		}
		got = append(got, s.Records...)
	}
	want := slices.Clone(produced)
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records of completed batches (-produced +got):\n%s", diff)
	}

	if out != "" {
		checkFiles(t, out, rl1, rl2)
	}
	if len(st2.Pending)+len(st2.Unallocated) != 0 {
		t.Errorf("after the drain the log still holds %d pending batches, %d unallocated blocks",
			len(st2.Pending), len(st2.Unallocated))
	}
}

// checkFiles checks that the files sink wrote one file per batch time seen
// with records (none for an empty batch),
// every batch being complete after the drain, holding the batch's records
// (the same in both runs, as Check checks): exactly-once output
// across the crash.
func checkFiles(t testing.TB, out string, rl1, rl2 *Recorder) {
	t.Helper()
	sink, err := files.New(files.Config[string]{Dir: out})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	want := map[batch.Time]string{}
	for _, rl := range []*Recorder{rl1, rl2} {
		for tm, s := range rl.saw {
			if len(s.Records) == 0 {
				continue // the sink writes no file for an empty batch
			}
			var sb strings.Builder
			for _, r := range s.Records {
				sb.WriteString(r + "\n")
			}
			want[tm] = sb.String()
		}
	}
	got := map[batch.Time]string{}
	times, err := sink.Batches()
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range times {
		b, err := os.ReadFile(sink.Path(tm))
		if err != nil {
			t.Fatal(err)
		}
		got[tm] = string(b)
	}
	// An empty batch the crash interrupted is not in the log and does not
	// run again: the files output may not have reached it.
	for tm, s := range rl1.saw {
		_, again := rl2.saw[tm]
		if _, ok := got[tm]; !ok && !again && !rl1.completed[tm] && len(s.Records) == 0 {
			delete(want, tm)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of completed batches (-want +got):\n%s", diff)
	}
}
