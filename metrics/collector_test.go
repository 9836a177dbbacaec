package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/metrics"
	"github.com/weirstream/weir/stream"
)

// logs keeps the records logged at INFO and above.
type logs struct {
	mu   sync.Mutex
	recs []string // "LEVEL message"
}

func (h *logs) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *logs) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *logs) WithGroup(string) slog.Handler                { return h }
func (h *logs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Level.String()+" "+r.Message)
	return nil
}

func (h *logs) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.recs
	h.recs = nil
	return out
}

// fakeReceiver is a metrics.Receiver whose answers the test sets.
type fakeReceiver struct {
	mu    sync.Mutex
	name  string
	stats metrics.ReceiverStats
}

func (f *fakeReceiver) Name() string {
	if f.name == "" {
		return "stream"
	}
	return f.name
}

func (f *fakeReceiver) Stats() metrics.ReceiverStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *fakeReceiver) set(fn func(f *fakeReceiver)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fakeTable is a metrics.LeaseLister.
type fakeTable struct {
	leases []metrics.Lease
	err    error
}

func (f *fakeTable) List(context.Context) ([]metrics.Lease, error) {
	return append([]metrics.Lease(nil), f.leases...), f.err
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := metrics.New(metrics.Config{History: -1, SampleInterval: 2, Receivers: []metrics.Receiver{nil, &fakeReceiver{name: "a"}, &fakeReceiver{name: "a"}}})
	if !errors.Is(err, metrics.ErrInvalidConfig) {
		t.Fatalf("New: %v, want ErrInvalidConfig", err)
	}
	for _, field := range []string{"BatchInterval", "History", "Receivers[0]", `Receivers[1] and [2] are both named "a"`,
		"SampleInterval 2ns: must be at least 1ms", "n * time.Second"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}

func TestBatchCounts(t *testing.T) {
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, History: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rng := batch.SeqRange{Stream: "s", Shard: "shard-0", First: "1", Last: "9", Count: 3}
	run := func(tm batch.Time, records int, delay, took time.Duration, err error, recovered bool) {
		info := stream.BatchInfo{Time: tm, Blocks: 1, Records: records, Recovered: recovered, Ranges: []batch.SeqRange{rng}}
		c.BatchScheduled(info)
		info.SchedulingDelay = delay
		c.BatchStarted(info)
		info.ProcessingTime, info.Err = took, err
		info.Outputs = []stream.OutputInfo{{Output: "ForEach of Map (stream 1)", Retries: records / 5, Quarantined: records % 5}, {Output: "Print of From(source 0) (stream 0)"}}
		c.BatchCompleted(info)
	}
	c.BatchScheduled(stream.BatchInfo{Time: 9000})
	run(1000, 3, 10*time.Millisecond, 100*time.Millisecond, nil, true)
	run(2000, 5, 20*time.Millisecond, 200*time.Millisecond, errors.New("boom"), false)
	run(3000, 7, 30*time.Millisecond, 300*time.Millisecond, nil, false)

	s := c.Snapshot()
	want := metrics.BatchCounts{Scheduled: 4, Completed: 3, Failed: 1, Recovered: 1, Pending: 1, Records: 15}
	got := s.Batches
	got.SchedulingDelay, got.ProcessingTime, got.TotalDelay = metrics.Histogram{}, metrics.Histogram{}, metrics.Histogram{}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Batches (-want +got):\n%s", diff)
	}
	// Buckets: 10ms, 25ms, 50ms, 100ms, 250ms, 500ms, 1s, ...
	for _, h := range []struct {
		name   string
		h      metrics.Histogram
		sum    time.Duration
		counts []int64
	}{
		{"SchedulingDelay", s.Batches.SchedulingDelay, 60 * time.Millisecond, []int64{1, 1, 1}},
		{"ProcessingTime", s.Batches.ProcessingTime, 600 * time.Millisecond, []int64{0, 0, 0, 1, 1, 1}},
		{"TotalDelay", s.Batches.TotalDelay, 660 * time.Millisecond, []int64{0, 0, 0, 0, 2, 1}},
	} {
		counts := h.h.Counts[:len(h.counts)]
		if h.h.Sum != h.sum || h.h.Count() != 3 || !slices.Equal(counts, h.counts) {
			t.Errorf("%s: sum %v, count %d, first buckets %v; want %v, 3, %v", h.name, h.h.Sum, h.h.Count(), counts, h.sum, h.counts)
		}
	}
	var times []batch.Time
	for _, b := range s.Recent {
		times = append(times, b.Time)
	}
	if diff := cmp.Diff([]batch.Time{2000, 3000}, times); diff != "" {
		t.Errorf("Recent times, History 2 (-want +got):\n%s", diff)
	}
	wantFailed := metrics.BatchSample{Time: 2000, Records: 5, Blocks: 1, SchedulingDelay: 20 * time.Millisecond,
		ProcessingTime: 200 * time.Millisecond, TotalDelay: 220 * time.Millisecond, Err: "boom", Ranges: []batch.SeqRange{rng}}
	if diff := cmp.Diff([]metrics.BatchSample{wantFailed}, s.Failed); diff != "" {
		t.Errorf("Failed (-want +got):\n%s", diff)
	}
	wantOutputs := []metrics.OutputCounts{{Output: "ForEach of Map (stream 1)", Retries: 0 + 1 + 1, Quarantined: 3 + 0 + 2}, {Output: "Print of From(source 0) (stream 0)"}}
	if diff := cmp.Diff(wantOutputs, s.Outputs); diff != "" {
		t.Errorf("Outputs (-want +got):\n%s", diff)
	}
}

// TestWarnsWhenSchedulingDelayGrows feeds batches whose scheduling delay
// grows by 1s each (processing takes 2s per 1s batch), in virtual time.
func TestWarnsWhenSchedulingDelayGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &logs{}
		c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Logger: slog.New(h)})
		if err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(0)
		var got []string
		batchAt := func(d time.Duration) {
			info := stream.BatchInfo{Time: batch.TimeOf(time.Now()), SchedulingDelay: d, ProcessingTime: 2 * time.Second}
			c.BatchScheduled(info)
			c.BatchStarted(info)
			c.BatchCompleted(info)
			time.Sleep(time.Second)
			for _, l := range h.take() {
				got = append(got, d.String()+": "+l)
			}
		}
		for range 12 {
			batchAt(delay)
			delay += time.Second
		}
		batchAt(500 * time.Millisecond)
		want := []string{
			"3s: WARN metrics: batches fall behind: scheduling delay 3s (3.0 batch intervals of 1s) and growing; processing takes 2s per batch on average (last 4)",
			"6s: WARN metrics: batches fall behind: scheduling delay 6s (6.0 batch intervals of 1s) and growing; processing takes 2s per batch on average (last 7)",
			"500ms: INFO metrics: scheduling delay back under its warning level",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("logs (-want +got):\n%s", diff)
		}
		if w := c.Snapshot().Warnings; len(w) != 0 {
			t.Errorf("warnings still active after the delay fell: %v", w)
		}
	})
}

// TestSchedulingDelayAroundWarningLevel feeds batches whose scheduling
// delay swings around its warning level (3 s), 2.5 s and 3.5 s in turn:
// one warning, not a warning and its end at every other batch; the end is
// logged once the delay is well under the level (under half of it).
func TestSchedulingDelayAroundWarningLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &logs{}
		c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Logger: slog.New(h)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		batchAt := func(d time.Duration) {
			info := stream.BatchInfo{Time: batch.TimeOf(time.Now()), SchedulingDelay: d, ProcessingTime: time.Second}
			c.BatchCompleted(info)
			time.Sleep(time.Second)
			for _, l := range h.take() {
				got = append(got, d.String()+": "+strings.Fields(l)[0])
			}
		}
		for i := range 20 {
			batchAt(2500*time.Millisecond + time.Duration(i%2)*time.Second)
		}
		batchAt(1400 * time.Millisecond)
		if diff := cmp.Diff([]string{"3.5s: WARN", "1.4s: INFO"}, got); diff != "" {
			t.Errorf("logs (-want +got):\n%s", diff)
		}
	})
}

// TestWarnsWhenShardLagGrows samples a receiver whose shard falls further
// behind at every sample, then catches up.
func TestWarnsWhenShardLagGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &logs{}
		r := &fakeReceiver{}
		c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{r}, LagWarning: 10 * time.Second, Logger: slog.New(h)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, behind := range []int64{0, 5000, 12000, 11000, 13000, 15000, 18000, 30000, 40000, 2000} {
			r.set(func(f *fakeReceiver) {
				f.stats.Shards = map[string]metrics.ShardStats{"shard-0": {Reading: true, Behind: time.Duration(behind) * time.Millisecond}}
			})
			c.Sample(t.Context())
			got = append(got, h.take()...)
			if behind == 40000 {
				if w := c.Snapshot().Warnings; len(w) != 1 || w[0].Kind != "shard_lag" || w[0].Subject != "shard-0" {
					t.Errorf("active warnings %+v, want one shard_lag for shard-0", w)
				}
			}
			time.Sleep(time.Second)
		}
		want := []string{
			"WARN metrics: a shard falls behind: 18s behind the tip of the stream and growing over the last 3 samples",
			"WARN metrics: a shard falls behind: 40s behind the tip of the stream and growing over the last 3 samples",
			"INFO metrics: shard lag back under its warning level",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("logs (-want +got):\n%s", diff)
		}
	})
}

// TestShardLagWarningEndsWithTheShard warns about a shard falling behind,
// then the shard stops being read here (its lease went to another worker)
// or leaves the receiver's stats: the warning ends, at INFO, saying why
// (not that the lag is back under its level, which no one saw), and is no
// longer active.
func TestShardLagWarningEndsWithTheShard(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  map[string]metrics.ShardStats
		want string
	}{
		{"not read", map[string]metrics.ShardStats{"shard-0": {Behind: 50 * time.Second}}, "INFO metrics: shard no longer read here: its lag warning ends"},
		{"gone", map[string]metrics.ShardStats{}, "INFO metrics: shard no longer reported: its lag warning ends"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &logs{}
				r := &fakeReceiver{}
				c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{r}, LagWarning: 10 * time.Second, Logger: slog.New(h)})
				if err != nil {
					t.Fatal(err)
				}
				for _, behind := range []time.Duration{11, 12, 13, 14} {
					r.set(func(f *fakeReceiver) {
						f.stats.Shards = map[string]metrics.ShardStats{"shard-0": {Reading: true, Behind: behind * time.Second}}
					})
					c.Sample(t.Context())
					time.Sleep(time.Second)
				}
				if w := c.Snapshot().Warnings; len(w) != 1 {
					t.Fatalf("active warnings %+v, want one shard_lag: the test does not test", w)
				}
				h.take()
				r.set(func(f *fakeReceiver) { f.stats.Shards = tc.end })
				c.Sample(t.Context())
				if diff := cmp.Diff([]string{tc.want}, h.take()); diff != "" {
					t.Errorf("logs (-want +got):\n%s", diff)
				}
				if w := c.Snapshot().Warnings; len(w) != 0 {
					t.Errorf("active warnings %+v, want none", w)
				}
			})
		})
	}
}

// TestLeaseChanges samples a receiver whose leases change, with the lease
// table listed at every sample, in virtual time.
func TestLeaseChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeReceiver{stats: metrics.ReceiverStats{WorkerID: "me"}}
		table := &fakeTable{}
		c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{r}, Leases: table, LeaseDuration: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		lease := func(shard, owner string, counter int64) metrics.Lease {
			return metrics.Lease{Shard: shard, Owner: owner, Counter: counter}
		}
		step := func(held []metrics.Lease, leases ...metrics.Lease) {
			r.set(func(f *fakeReceiver) {
				f.stats.Held = nil
				for _, l := range held {
					f.stats.Held = append(f.stats.Held, l.Shard)
				}
			})
			table.leases = leases
			c.Sample(t.Context())
			time.Sleep(5 * time.Second)
		}
		// a: new, unowned; b: live owner "w2" (counter moves); c: dead owner "w3".
		step(nil, lease("a", "", 1), lease("b", "w2", 1), lease("c", "w3", 7))
		step(nil, lease("a", "", 1), lease("b", "w2", 2), lease("c", "w3", 7))
		step(nil, lease("a", "", 1), lease("b", "w2", 3), lease("c", "w3", 7))
		mine := []metrics.Lease{lease("a", "me", 2), lease("b", "me", 4), lease("c", "me", 8)}
		step(mine, mine...)
		step(mine[:2], lease("a", "me", 3), lease("b", "me", 5), lease("c", "w2", 9))

		s := c.Snapshot()
		want := metrics.LeaseCounts{Taken: 1, Stolen: 1, Expired: 1, Lost: 1}
		if diff := cmp.Diff(want, s.Receivers[0].Leases); diff != "" {
			t.Errorf("lease counts (-want +got):\n%s", diff)
		}
		// A drain hands a and b back: not lost.
		r.set(func(f *fakeReceiver) {
			f.stats.Shards = map[string]metrics.ShardStats{"a": {HandedBack: 1}, "b": {HandedBack: 1}}
		})
		step(nil, lease("a", "", 4), lease("b", "", 6), lease("c", "w2", 9))
		want.HandedBack = 2
		if diff := cmp.Diff(want, c.Snapshot().Receivers[0].Leases); diff != "" {
			t.Errorf("lease counts after a drain handed a and b back (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"me", "w2"}, s.Fleet.Workers); diff != "" {
			t.Errorf("workers (-want +got):\n%s", diff)
		}
		table.leases, table.err = nil, errors.New("table gone") // a failed listing: no leases
		c.Sample(t.Context())
		if f := c.Snapshot().Fleet; f.Err != "table gone" || len(f.Leases) != 3 {
			t.Errorf("after a failed listing: Err %q, %d leases; want the error and the last listing", f.Err, len(f.Leases))
		}
	})
}

// TestCheckpointLag samples a receiver whose completed records move ahead of
// its checkpoint, which then catches up. Before the receiver's first
// checkpoint of the shard, the lag is not measured: it would only count the
// time until the first checkpoint interval ends (a minute by default).
func TestCheckpointLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeReceiver{}
		c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{r}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		set := func(completed, committed string, commits int64) {
			r.set(func(f *fakeReceiver) {
				f.stats.Shards = map[string]metrics.ShardStats{"s": {
					LatestCompleted: completed, Checkpointed: true, Checkpoint: committed, CheckpointCommits: commits,
				}}
			})
			c.Sample(t.Context())
		}
		var got []string
		for _, st := range []struct {
			completed, committed string
			commits              int64
		}{
			{"3", "TRIM_HORIZON", 0}, {"4", "TRIM_HORIZON", 0}, {"5", "5", 1}, {"7", "5", 1}, {"9", "5", 1}, {"9", "7", 2}, {"9", "9", 3},
		} {
			set(st.completed, st.committed, st.commits)
			lag, ok := c.Snapshot().Receivers[0].CheckpointLag["s"]
			got = append(got, fmt.Sprint(lag, ok))
			time.Sleep(time.Second)
		}
		want := []string{"0s false", "0s false", "0s true", "0s true", "1s true", "1s true", "0s true"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("checkpoint lag per sample, and whether measured (-want +got):\n%s", diff)
		}
	})
}

// TestCheckpointLagOfShardReadAgain samples a receiver that forgets a
// shard it stopped reading (as a Kinesis receiver does 10 minutes after)
// and reads it again 20 minutes later from the same checkpoint: the lag
// starts from the new read, not from the positions the shard had before.
func TestCheckpointLagOfShardReadAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeReceiver{}
		c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{r}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		set := func(shards map[string]metrics.ShardStats) {
			r.set(func(f *fakeReceiver) { f.stats.Shards = shards })
			c.Sample(t.Context())
		}
		read := func(completed string) map[string]metrics.ShardStats {
			return map[string]metrics.ShardStats{"s": {LatestCompleted: completed, Checkpointed: true, Checkpoint: "5", CheckpointCommits: 1}}
		}
		set(read("9")) // completed past the checkpoint, then the lease lost
		time.Sleep(10 * time.Minute)
		set(nil) // forgotten
		time.Sleep(10 * time.Minute)
		set(read("6")) // taken back from the checkpoint
		if lag := c.Snapshot().Receivers[0].CheckpointLag["s"]; lag != 0 {
			t.Errorf("checkpoint lag of a shard read again just now is %v, want 0s: it counts from positions before it was forgotten", lag)
		}
	})
}

// TestRunSamplesOnItsInterval runs the Collector for 3.5 sample intervals
// of virtual time and checks the unbatched records it saw.
func TestRunSamplesOnItsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeReceiver{}
		c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{r}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		c.BatchScheduled(stream.BatchInfo{Records: 4})
		for i := range 3 {
			r.set(func(f *fakeReceiver) { f.stats.RecordsRead = int64(10 * (i + 1)) })
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if got := c.Snapshot().Batches.UnbatchedRecords; got != 26 {
			t.Errorf("Unbatched = %d, want 30 read - 4 batched = 26", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestWarnsAboutLastingListingFailures fails the lease table's listing: a
// table a starting receiver has not created yet fails a listing or two, so
// only the fifth failure in a row is logged at WARN, and the tenth and
// twentieth (as for every warned condition, again as it doubles); the
// warning holds (Snapshot.Warnings) until a listing succeeds, which is
// logged at INFO.
func TestWarnsAboutLastingListingFailures(t *testing.T) {
	h := &logs{}
	table := &fakeTable{err: errors.New("ResourceNotFoundException")}
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Leases: table, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 1; i <= 33; i++ {
		switch i {
		case 7:
			table.err = nil
		case 8:
			table.err = errors.New("AccessDeniedException")
		}
		c.Sample(t.Context())
		for _, l := range h.take() {
			got = append(got, fmt.Sprintf("%d %s", i, strings.Fields(l)[0]))
		}
		active := c.Snapshot().Warnings
		warned := len(active) == 1 && active[0].Kind == "lease_listing"
		if want := (i >= 5 && i < 7) || i >= 12; warned != want || (!warned && len(active) > 0) {
			t.Errorf("after listing %d, active warnings %+v, want a lease_listing warning: %v", i, active, want)
		}
	}
	want := []string{"5 WARN", "7 INFO", "12 WARN", "17 WARN", "27 WARN"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("samples that logged, and at which level (-want +got):\n%s", diff)
	}
}

// TestErrorTextsBounded completes batches failing with a 1 MiB error, and
// fails a listing of the lease table with one: the Snapshot keeps at most
// 4 KiB of each, cut at a character boundary, saying how much was cut.
func TestErrorTextsBounded(t *testing.T) {
	table := &fakeTable{err: errors.New(strings.Repeat("é", 1<<19))} // 1 MiB
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, History: 3, Leases: table, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	huge := errors.New("x" + strings.Repeat("é", 1<<19))
	for i := range 10 {
		info := stream.BatchInfo{Time: batch.Time(1000 * (i + 1)), Records: 1, Blocks: 1, Err: huge}
		c.BatchScheduled(info)
		c.BatchStarted(info)
		c.BatchCompleted(info)
	}
	c.Sample(t.Context())
	s := c.Snapshot()
	texts := []string{s.Fleet.Err}
	for _, b := range append(s.Recent, s.Failed...) {
		texts = append(texts, b.Err)
	}
	for i, text := range texts {
		if len(text) > 4<<10 || !utf8.ValidString(text) || !strings.HasSuffix(text, " bytes cut]") {
			t.Errorf("error text %d: %d bytes, valid UTF-8 %v, ending %q; want at most 4096, valid, ending with the bytes cut",
				i, len(text), utf8.ValidString(text), text[max(len(text)-30, 0):])
		}
	}
}

// TestPartialListing lists a lease table of which one item cannot be read
// as a lease: the listing returns the others with an error naming it. The
// Collector shows those leases (one moved to another worker meanwhile) with
// the error, and does not warn that the table cannot be listed, however
// long the item stays bad; a nil listing with an error still fails.
func TestPartialListing(t *testing.T) {
	h := &logs{}
	table := &fakeTable{leases: []metrics.Lease{{Shard: "a", Owner: "w1", Counter: 1}, {Shard: "b", Owner: "w1", Counter: 1}}}
	c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Leases: table, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	c.Sample(t.Context())
	bad := errors.New(`leasetable: table t, item leaseKey="c": leaseCounter is not a number; fix: ...`)
	table.leases, table.err = []metrics.Lease{{Shard: "a", Owner: "w2", Counter: 2}, {Shard: "b", Owner: "w1", Counter: 1}}, bad
	for range 10 {
		c.Sample(t.Context())
	}
	s := c.Snapshot()
	want := &metrics.Fleet{Listed: s.Fleet.Listed, Leases: table.leases, Workers: []string{"w1", "w2"}, Unreadable: bad.Error()}
	if diff := cmp.Diff(want, s.Fleet); diff != "" {
		t.Errorf("fleet after partial listings (-want +got):\n%s", diff)
	}
	if len(s.Warnings) > 0 || len(h.take()) > 0 {
		t.Errorf("partial listings warned: %+v", s.Warnings)
	}
	table.leases = nil
	for range 5 {
		c.Sample(t.Context())
	}
	if s := c.Snapshot(); len(s.Warnings) != 1 || len(s.Fleet.Leases) != 2 {
		t.Errorf("after 5 failed listings: warnings %+v, %d leases; want a lease_listing warning and the last listing", s.Warnings, len(s.Fleet.Leases))
	}
}

// TestShardLagWarningNamesTheStream samples two receivers, of two streams
// whose shards have the same IDs (as every stream's do), one shard of each
// falling behind: the two warnings, and their log lines, name the stream,
// so that they can be told apart, and are listed in a stable order.
func TestShardLagWarningNamesTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		orders, clicks := &fakeReceiver{name: "orders"}, &fakeReceiver{name: "clicks"}
		c, err := metrics.New(metrics.Config{BatchInterval: time.Second, Receivers: []metrics.Receiver{orders, clicks},
			LagWarning: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		for _, behind := range []time.Duration{11, 12, 13, 14} {
			for _, r := range []*fakeReceiver{orders, clicks} {
				r.set(func(f *fakeReceiver) {
					f.stats.Shards = map[string]metrics.ShardStats{"shardId-000000000000": {Reading: true, Behind: behind * time.Second}}
				})
			}
			c.Sample(t.Context())
			time.Sleep(time.Second)
		}
		var got []string
		for _, w := range c.Snapshot().Warnings {
			got = append(got, w.Kind+" "+w.Stream+" "+w.Subject)
		}
		want := []string{"shard_lag clicks shardId-000000000000", "shard_lag orders shardId-000000000000"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("active warnings (-want +got):\n%s", diff)
		}
		for _, name := range []string{"orders", "clicks"} {
			if !strings.Contains(buf.String(), "stream="+name+" shard=shardId-000000000000") {
				t.Errorf("no log line names stream %s and its shard:\n%s", name, buf.String())
			}
		}
	})
}
