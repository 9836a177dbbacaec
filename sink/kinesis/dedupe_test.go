package kinesis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/origin"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/sink/kinesis"
	source "github.com/weirstream/weir/source/kinesis"
	"github.com/weirstream/weir/source/kinesis/kinesistest"
	"github.com/weirstream/weir/source/memory"
	"github.com/weirstream/weir/stream"
)

// putCopies puts on the fake stream name the records two writers wrote
// through faults, as a reader meets them: per batch, a first run cut short
// by a crash (record 3 failed and came after 7: a late first copy), then
// the replay of the whole batch (record 30 failed and came after 33, and
// the request of records 10 to 14 applied twice: the SDK retried a call
// whose answer was lost); and untagged records of another producer in
// between, one of them with a tag of an unknown version. It returns the data expected out of Deduplicate, per shard in
// order: each first copy's payload, and the untagged records.
func putCopies(t testing.TB, fake *kinesistest.Fake, name string) map[string][]string {
	t.Helper()
	want := map[string][]string{}
	seen := map[origin.Tag]bool{}
	put := func(key string, data []byte, out string) {
		shard, _, err := fake.Put(name, key, data)
		if err != nil {
			t.Fatal(err)
		}
		if out != "" {
			want[shard] = append(want[shard], out)
		}
	}
	tagged := func(w string, bt int64, i int) {
		tag := origin.Tag{Writer: w, Batch: bt, Index: uint64(i)}
		payload := fmt.Sprintf("%s/%d/%d", w, bt, i)
		out := ""
		if !seen[tag] {
			out = payload
		}
		seen[tag] = true
		put(fmt.Sprint("k", i%5), origin.Append(nil, tag, []byte(payload)), out)
	}
	order := func(n, late, after int) []int { // 0..n-1 with late moved after after
		var is []int
		for i := range n {
			if i != late {
				is = append(is, i)
			}
			if i == after {
				is = append(is, late)
			}
		}
		return is
	}
	for _, bt := range []int64{1000, 2000} {
		for _, w := range []string{"a", "b"} {
			for _, i := range order(25, 3, 7) { // run 1, crashed
				tagged(w, bt, i)
			}
			put("other", fmt.Appendf(nil, "plain %s %d", w, bt), fmt.Sprintf("plain %s %d", w, bt))
			newer := fmt.Sprintf("\xF6weir\x63 a newer tag %s %d", w, bt) // passed as it is
			put("other", []byte(newer), newer)
			for _, i := range order(40, 30, 33) { // the replay
				tagged(w, bt, i)
				if i == 14 {
					for j := 10; j <= 14; j++ { // a request applied twice
						tagged(w, bt, j)
					}
				}
			}
		}
	}
	return want
}

// taggedStream returns a fake with a stream "tagged" of 2 shards holding
// putCopies's records, and what Deduplicate must let through of them.
func taggedStream(t testing.TB) (*kinesistest.Fake, map[string][]string) {
	t.Helper()
	fake := kinesistest.New()
	if err := fake.CreateStream("tagged", 2); err != nil {
		t.Fatal(err)
	}
	return fake, putCopies(t, fake, "tagged")
}

// dedupeRun builds a pipeline reading the fake stream name through
// Deduplicate; out gets each batch's records' data by shard.
func dedupeRun(t testing.TB, fake *kinesistest.Fake, name string, cfg stream.Config,
	out func(ctx context.Context, p *stream.Pipeline, b *batch.Batch[source.Record]) error) *stream.Pipeline {
	t.Helper()
	cfg.BatchInterval = 100 * time.Millisecond
	cfg.Logger = slog.New(slog.DiscardHandler)
	p, err := stream.NewPipeline(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.New(source.Config{Stream: name, App: "dedupe", Client: fake,
		InitialPosition: source.TrimHorizon, PollInterval: 10 * time.Millisecond,
		MinReadInterval: 50 * time.Millisecond, RecordsPerRead: 10})
	if err != nil {
		t.Fatal(err)
	}
	stream.ForEachBatch(kinesis.Deduplicate(stream.From(p, src)), func(ctx context.Context, b *batch.Batch[source.Record]) error {
		return out(ctx, p, b)
	})
	return p
}

// byShard is the data of b's records by shard, in order.
func byShard(b *batch.Batch[source.Record]) map[string][]string {
	m := map[string][]string{}
	for r := range b.All() {
		m[r.ShardID] = append(m[r.ShardID], string(r.Data))
	}
	return m
}

func count(m map[string][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// TestDeduplicateKeepsFirstCopies checks that Deduplicate, on the copies
// crash replays and PutRecords retries leave, delivers exactly the first
// copy of every tagged record, untagged, and the untagged records as they
// are, each shard's in order.
func TestDeduplicateKeepsFirstCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, want := taggedStream(t)
		got := map[string][]string{}
		p := dedupeRun(t, fake, "tagged", stream.Config{}, func(ctx context.Context, p *stream.Pipeline, b *batch.Batch[source.Record]) error {
			for s, d := range byShard(b) {
				got[s] = append(got[s], d...)
			}
			if count(got) >= count(want) {
				return p.Drain(ctx)
			}
			return nil
		})
		if err := p.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Deduplicate's output (-want +got):\n%s", diff)
		}
	})
}

var errCrash = errors.New("crash")

// TestDeduplicateExactAfterCrash crashes a pipeline reading through
// Deduplicate with a recovery log after the dedupe's state took a batch
// in, its output ran, and before the batch completed (the log's completion
// append fails, as in a kill -9 before it). The restart restores the state
// from the log's snapshot and replays the completed batches, then
// recomputes the interrupted one: it must drop and keep exactly what it did
// the first time, so the output, taken per batch time (the last run of a
// batch replacing the earlier), holds every record once.
func TestDeduplicateExactAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake, want := taggedStream(t)
		log := recoverylog.NewMemory()

		var mu sync.Mutex
		outs := map[batch.Time]map[string][]string{} // the last run of each batch
		first := map[batch.Time]map[string][]string{}
		total := func() int {
			n := 0
			for _, m := range outs {
				n += count(m)
			}
			return n
		}
		collect := func(ctx context.Context, p *stream.Pipeline, b *batch.Batch[source.Record]) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := first[b.Time()]; !ok {
				first[b.Time()] = byShard(b)
			}
			outs[b.Time()] = byShard(b)
			if total() >= count(want) {
				return p.Drain(ctx)
			}
			return nil
		}

		p1 := dedupeRun(t, fake, "tagged", stream.Config{Recovery: log, StateSnapshotInterval: 200 * time.Millisecond}, collect)
		completions := 0
		log.SetAppendHook(func(_ int, entries []recoverylog.Entry) recoverylog.Fault {
			for _, e := range entries {
				if e.Kind == recoverylog.KindBatchCompleted {
					mu.Lock()
					nonEmpty := count(outs[e.Time]) > 0
					mu.Unlock()
					if nonEmpty {
						if completions++; completions == 4 {
							p1.Stop()
							return recoverylog.Fault{Err: errCrash}
						}
					}
				}
			}
			return recoverylog.Fault{}
		})
		// Stopped, Run returns nil or the failed completion.
		if err := p1.Run(t.Context()); err != nil && !errors.Is(err, errCrash) {
			t.Fatalf("first Run: %v", err)
		}
		log.SetAppendHook(nil)
		snapshots := 0
		for _, e := range log.Entries() {
			if e.Kind == recoverylog.KindSnapshot {
				snapshots++
			}
		}
		if snapshots < 2 {
			t.Fatalf("%d snapshots in the log: the restart would replay the state from empty", snapshots)
		}
		mu.Lock()
		crashed := slices.Max(slices.Collect(maps.Keys(outs)))
		before := total()
		mu.Unlock()
		if before >= count(want) {
			t.Fatal("the first run delivered everything before its crash")
		}

		p2 := dedupeRun(t, fake, "tagged", stream.Config{Recovery: log, StateSnapshotInterval: 200 * time.Millisecond}, collect)
		if err := p2.Run(t.Context()); err != nil {
			t.Fatalf("second Run: %v", err)
		}
		if diff := cmp.Diff(first[crashed], outs[crashed]); diff != "" {
			t.Errorf("recomputed batch %v decided otherwise (-first +recomputed):\n%s", crashed, diff)
		}
		got := map[string][]string{}
		for _, bt := range slices.Sorted(maps.Keys(outs)) {
			for s, d := range outs[bt] {
				got[s] = append(got[s], d...)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("output after the crash and restart (-want +got):\n%s", diff)
		}
		t.Logf("crashed in batch %v with %d of %d records delivered", crashed, before, count(want))
	})
}

// sharing is a memory source that says it shares its shards with other
// workers, as a Kinesis receiver with leases does.
type sharing struct{ *memory.Source[source.Record] }

func (sharing) SharesShards() bool { return true }

// TestDeduplicateAcceptedOnSharedShards checks that Deduplicate, whose
// state is kept by shard, is accepted on a source sharing its shards with
// other workers, while a stateful operator after it is still refused
// (stream.ErrSplitState).
func TestDeduplicateAcceptedOnSharedShards(t *testing.T) {
	build := func(after bool) error {
		p, err := stream.NewPipeline(stream.Config{BatchInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[source.Record](memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		kept := kinesis.Deduplicate(stream.From(p, sharing{src}))
		if after {
			byKey := stream.Map(kept, func(r source.Record) stream.Pair[string, int] {
				return stream.Pair[string, int]{Key: r.PartitionKey, Value: 1}
			})
			kept = stream.Map(stream.UpdateStateByKey(byKey, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true }),
				func(stream.Pair[string, int]) source.Record { return source.Record{} })
		}
		stream.ForEachBatch(kept, func(context.Context, *batch.Batch[source.Record]) error { return nil })
		return p.Validate()
	}
	if err := build(false); err != nil {
		t.Errorf("Deduplicate on shared shards: %v", err)
	}
	if err := build(true); !errors.Is(err, stream.ErrSplitState) {
		t.Errorf("a keyed state after Deduplicate on shared shards: %v, want ErrSplitState", err)
	}
}
