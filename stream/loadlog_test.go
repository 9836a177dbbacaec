package stream_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/recoverylog"
	"github.com/weirstream/weir/recovery"
	"github.com/weirstream/weir/stream"
)

// blockCounter counts the blocks of the batches that completed with
// records, and notes those batches.
type blockCounter struct {
	stream.NopListener
	mu      sync.Mutex
	blocks  int
	batches map[batch.Time]bool
}

func (c *blockCounter) BatchCompleted(info stream.BatchInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if info.Err == nil && info.Blocks > 0 {
		c.blocks += info.Blocks
		c.batches[info.Time] = true
	}
}

// TestLoadLogEntries checks that a pipeline under load writes one
// recovery log entry per block and one per batch with records (its
// completion), with and without state (its snapshot entries, and its
// empty batches, aside): a block's entry allocates it to its batch, so no
// batch with records is allocated by an entry of its own. Records come every 100 ms on 1 s batches, so each
// batch has several blocks (the block interval is 200 ms).
func TestLoadLogEntries(t *testing.T) {
	for _, stateful := range []bool{false, true} {
		name := "stateless"
		if stateful {
			name = "stateful"
		}
		t.Run(name, func(t *testing.T) { testLoadLogEntries(t, stateful) })
	}
}

func testLoadLogEntries(t *testing.T, stateful bool) {
	synctest.Test(t, func(t *testing.T) {
		const (
			iv     = time.Second
			pushes = 300 // 30 s
		)
		store := recoverylog.NewMemory()
		appended := recordAppends(store)
		counter := &blockCounter{batches: map[batch.Time]bool{}}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: store, Listeners: []stream.Listener{counter}})
		if err != nil {
			t.Fatal(err)
		}
		d := &durable{log: store, out: t.TempDir()}
		src := newReplay(t, d)
		s := stream.From(p, src)
		stream.ForEachBatch(s, func(context.Context, *batch.Batch[string]) error { return nil })
		if stateful {
			pairs := stream.Map(s, func(r string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: stateKey(r), Value: 1} })
			counts := stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
			stream.ForEachBatch(counts, func(context.Context, *batch.Batch[stream.Pair[string, int]]) error { return nil })
		}
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		time.Sleep(50 * time.Millisecond)
		for range pushes {
			src.produce(d.record())
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * iv)
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		counter.mu.Lock()
		blocks, batches := counter.blocks, len(counter.batches)
		counter.mu.Unlock()
		if batches < pushes/10-1 || blocks < 3*batches {
			t.Fatalf("%d batches with %d blocks completed, want about %d with 5 each: the test does not test", batches, blocks, pushes/10)
		}
		kinds := map[recoverylog.Kind]int{}
		logged := 0 // entries of blocks, and of batches with records
		for _, e := range *appended {
			kinds[e.Kind]++
			switch e.Kind {
			case recoverylog.KindBlockStored:
				logged++
			case recoverylog.KindBatchAllocated, recoverylog.KindBatchCompleted:
				if counter.batches[e.Time] {
					logged++
				}
			}
		}
		if logged > blocks+batches {
			t.Errorf("%d batches of %d blocks wrote %d log entries of blocks and batches, want at most %d (one per block and per batch): %v",
				batches, blocks, logged, blocks+batches, kinds)
		}
		t.Logf("%d batches, %d blocks: entries %v", batches, blocks, kinds)
	})
}

// TestSlowBlockEntryStaysInItsBatch slows down the log append of a block
// past the cut of the batch it is logged in: the cut waits for it, so
// every batch's outputs see exactly the blocks the log has in it, as a
// restart would recompute them (G2).
func TestSlowBlockEntryStaysInItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		store := recoverylog.NewMemory()
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: slowBlock{store: store, nth: 3, delay: iv + iv/2}})
		if err != nil {
			t.Fatal(err)
		}
		d := &durable{log: store, out: t.TempDir()}
		src := newReplay(t, d)
		var mu sync.Mutex
		saw := map[batch.Time][]batch.BlockID{}
		stream.ForEachBatch(stream.From(p, src), func(_ context.Context, b *batch.Batch[string]) error {
			mu.Lock()
			defer mu.Unlock()
			saw[b.Time()] = append(saw[b.Time()], b.BlockIDs()...)
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		for range 50 {
			src.produce(d.record())
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(3 * iv)
		// The log before the drain, whose end may compact it (an idle
		// Run gives back the batch times it reserved).
		logged := map[batch.Time][]batch.BlockID{}
		for _, e := range store.Entries() {
			if e.Kind == recoverylog.KindBlockStored && e.Batch != 0 {
				logged[e.Batch] = append(logged[e.Batch], e.Block.ID)
			}
		}
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for bt, ids := range saw {
			if len(ids) == 0 {
				delete(saw, bt)
			}
		}
		if len(logged) < 4 {
			t.Fatalf("%d batches logged by their blocks' entries: the test does not test", len(logged))
		}
		if diff := cmp.Diff(logged, saw); diff != "" {
			t.Errorf("blocks by batch, the log's (-) and the outputs' (+):\n%s", diff)
		}
	})
}

// slowBlock opens its store's logs with an Append that waits delay before
// appending the nth block entry.
type slowBlock struct {
	store *recoverylog.MemoryStore
	nth   int
	delay time.Duration
}

func (o slowBlock) Open(ctx context.Context) (recovery.Log, error) {
	l, err := o.store.Open(ctx)
	return &slowBlockLog{Log: l, nth: o.nth, delay: o.delay}, err
}

type slowBlockLog struct {
	recovery.Log
	nth    int
	delay  time.Duration
	mu     sync.Mutex
	blocks int
}

func (l *slowBlockLog) Append(ctx context.Context, records ...[]byte) error {
	entries, err := recoverylog.DecodeEntries(records)
	if err != nil {
		return err
	}
	if len(entries) > 0 && entries[0].Kind == recoverylog.KindBlockStored {
		l.mu.Lock()
		l.blocks++
		slow := l.blocks == l.nth
		l.mu.Unlock()
		if slow {
			time.Sleep(l.delay) // not holding the store's lock
		}
	}
	return l.Log.Append(ctx, records...)
}

// TestCompactionAfterSnapshot checks that a pipeline with state compacts
// its log right after a snapshot entry, when no completed batch is kept
// for a replay: a compaction rewrites only the shape, the snapshot, the
// pending batches and the progress, not the batches since the snapshot
// (three entries each).
func TestCompactionAfterSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = time.Second
		store := recoverylog.NewMemory()
		rec := &replaces{store: store}
		p, err := stream.NewPipeline(stream.Config{BatchInterval: iv, Recovery: rec, CompactEvery: 10, StateSnapshotInterval: 4 * iv})
		if err != nil {
			t.Fatal(err)
		}
		d := &durable{log: store, out: t.TempDir()}
		src := newReplay(t, d)
		pairs := stream.Map(stream.From(p, src), func(r string) stream.Pair[string, int] { return stream.Pair[string, int]{Key: stateKey(r), Value: 1} })
		counts := stream.UpdateStateByKey(pairs, func(_ string, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true })
		stream.ForEachBatch(counts, func(context.Context, *batch.Batch[stream.Pair[string, int]]) error { return nil })
		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		for range 60 {
			src.produce(d.record())
			time.Sleep(iv)
		}
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.replaced) < 3 {
			t.Fatalf("%d compactions: the test does not test", len(rec.replaced))
		}
		for i, entries := range rec.replaced {
			for _, e := range entries {
				if e.Kind == recoverylog.KindBatchCompleted {
					t.Errorf("compaction %d rewrote a completed batch, kept for a replay: %v", i, entries)
					break
				}
			}
		}
	})
}

// replaces opens its store's logs, noting the entries of every Replace.
type replaces struct {
	store    *recoverylog.MemoryStore
	mu       sync.Mutex
	replaced [][]recoverylog.Entry
}

func (o *replaces) Open(ctx context.Context) (recovery.Log, error) {
	l, err := o.store.Open(ctx)
	snaps, _ := l.(recovery.SnapshotStore)
	return replacesLog{Log: l, SnapshotStore: snaps, o: o}, err
}

type replacesLog struct {
	recovery.Log
	recovery.SnapshotStore
	o *replaces
}

func (l replacesLog) Replace(ctx context.Context, records [][]byte) error {
	entries, err := recoverylog.DecodeEntries(records)
	if err != nil {
		return err
	}
	l.o.mu.Lock()
	l.o.replaced = append(l.o.replaced, entries)
	l.o.mu.Unlock()
	return l.Log.Replace(ctx, records)
}
