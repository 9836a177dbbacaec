package memory_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/source/memory"
)

// fakeDriver stands in for the driver's push: it keeps every block it is
// given, in order, and returns its BlockInfo. If gate is not nil, each push
// first waits for a value on it.
type fakeDriver struct {
	gate   chan struct{}
	mu     sync.Mutex
	blocks []source.Block[string]
	infos  []batch.BlockInfo
}

func (d *fakeDriver) push(ctx context.Context, b source.Block[string]) (batch.BlockInfo, error) {
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return batch.BlockInfo{}, ctx.Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	info := batch.BlockInfo{ID: batch.BlockID{Seq: uint64(len(d.blocks))}, Ranges: b.Ranges, Count: len(b.Records)}
	d.blocks = append(d.blocks, b)
	d.infos = append(d.infos, info)
	return info, nil
}

func (d *fakeDriver) snapshot() ([]source.Block[string], []batch.BlockInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]source.Block[string](nil), d.blocks...), append([]batch.BlockInfo(nil), d.infos...)
}

// start runs src.Start in a goroutine and returns a channel with its result.
func start(ctx context.Context, src *memory.Source[string], rt source.Runtime[string]) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- src.Start(ctx, rt) }()
	return errc
}

func mustNew(t *testing.T, cfg memory.Config) *memory.Source[string] {
	t.Helper()
	src, err := memory.New[string](cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return src
}

// pushed tracks what a test pushed: by shard, the records in order, so that
// the record with sequence number n of shard s is pushed[s][n-1].
type pushed map[string][]string

// push pushes n records in one call and notes them; calls take shards in turn.
func (p pushed) push(src *memory.Source[string], call, n int) {
	recs := make([]string, n)
	for i := range recs {
		recs[i] = fmt.Sprintf("call%d-%d", call, i)
	}
	src.Push(recs...)
	shards := src.Shards()
	shard := shards[call%len(shards)]
	p[shard] = append(p[shard], recs...)
}

// recordsOf returns the records the ranges denote, from what was pushed.
func (p pushed) recordsOf(t *testing.T, ranges []batch.SeqRange) []string {
	t.Helper()
	var out []string
	for _, r := range ranges {
		first, err1 := strconv.Atoi(r.First)
		last, err2 := strconv.Atoi(r.Last)
		if err := errors.Join(err1, err2, r.Validate()); err != nil || r.Stream != "memory" {
			t.Fatalf("bad range %v: %v", r, err)
		}
		if r.Count != last-first+1 || last > len(p[r.Shard]) {
			t.Fatalf("range %v: count or span does not match what was pushed (%d records)", r, len(p[r.Shard]))
		}
		out = append(out, p[r.Shard][first-1:last]...)
	}
	return out
}

func TestDeliversEveryRecordOnceInShardOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := mustNew(t, memory.Config{Shards: 3})
		want, rnd := pushed{}, rand.New(rand.NewPCG(1, 2))
		call := 0
		for ; call < 20; call++ { // before Start
			want.push(src, call, 1+rnd.IntN(4))
		}
		d := &fakeDriver{}
		ctx := t.Context()
		startErr := start(ctx, src, source.Runtime[string]{Push: d.push, BlockInterval: 10 * time.Millisecond})
		for ; call < 60; call++ { // after Start
			want.push(src, call, 1+rnd.IntN(4))
			time.Sleep(time.Duration(rnd.IntN(5)) * time.Millisecond)
		}
		if err := src.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-startErr; err != nil {
			t.Fatalf("Start: %v", err)
		}

		blocks, infos := d.snapshot()
		if len(blocks) < 2 {
			t.Errorf("got %d blocks, want several", len(blocks))
		}
		got := pushed{}
		for i, b := range blocks {
			if diff := cmp.Diff(want.recordsOf(t, b.Ranges), b.Records); diff != "" {
				t.Errorf("block %d: records do not match its ranges (-want +got):\n%s", i, diff)
			}
			for _, r := range b.Ranges {
				got[r.Shard] = append(got[r.Shard], want.recordsOf(t, []batch.SeqRange{r})...)
			}
			rec, err := src.Recompute(ctx, infos[i])
			if err != nil {
				t.Errorf("Recompute block %d: %v", i, err)
			} else if diff := cmp.Diff(b.Records, rec); diff != "" {
				t.Errorf("Recompute block %d (-want +got):\n%s", i, diff)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("records by shard, in block order (-want +got):\n%s", diff)
		}
		for _, shard := range src.Shards() {
			if got, want := src.LatestStored(shard), strconv.Itoa(len(want[shard])); got != want {
				t.Errorf("LatestStored(%s): got %q, want %q", shard, got, want)
			}
		}
		if got := src.LatestStored("no-such-shard"); got != "" {
			t.Errorf("LatestStored of an unknown shard: got %q, want \"\"", got)
		}
	})
}

func TestStopFlushesAndThenRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := mustNew(t, memory.Config{})
		d := &fakeDriver{}
		ctx := t.Context()
		src.Push("a", "b")
		startErr := start(ctx, src, source.Runtime[string]{Push: d.push, BlockInterval: time.Hour})
		src.Push("c")
		if err := src.Send(ctx, "d"); err != nil {
			t.Fatalf("Send: %v", err)
		}
		if err := src.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-startErr; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if err := src.Push("e"); !errors.Is(err, source.ErrStopped) {
			t.Errorf("Push after Stop: got %v, want ErrStopped", err)
		}
		if err := src.Send(ctx, "f"); !errors.Is(err, source.ErrStopped) {
			t.Errorf("Send after Stop: got %v, want ErrStopped", err)
		}
		if err := src.Stop(ctx); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		blocks, _ := d.snapshot()
		var got []string
		for _, b := range blocks {
			got = append(got, b.Records...)
		}
		if diff := cmp.Diff([]string{"a", "b", "c", "d"}, got); diff != "" {
			t.Errorf("delivered (-want +got):\n%s", diff)
		}
		if got := src.LatestStored(memory.ShardName(0)); got != "4" {
			t.Errorf("LatestStored: got %q, want \"4\"", got)
		}
	})
}

func TestStopBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := mustNew(t, memory.Config{})
		src.Push("a")
		if err := src.Stop(t.Context()); err != nil {
			t.Fatalf("Stop before Start: %v", err)
		}
		if err := src.Push("b"); !errors.Is(err, source.ErrStopped) {
			t.Errorf("Push after Stop: got %v, want ErrStopped", err)
		}
		d := &fakeDriver{}
		if err := src.Start(t.Context(), source.Runtime[string]{Push: d.push, BlockInterval: time.Hour}); err != nil {
			t.Fatalf("Start after Stop: %v", err)
		}
		blocks, _ := d.snapshot()
		want := []source.Block[string]{{
			Ranges:  []batch.SeqRange{{Stream: "memory", Shard: memory.ShardName(0), First: "1", Last: "1", Count: 1}},
			Records: []string{"a"},
		}}
		if diff := cmp.Diff(want, blocks); diff != "" {
			t.Errorf("blocks (-want +got):\n%s", diff)
		}
		if err := src.Start(t.Context(), source.Runtime[string]{Push: d.push}); err == nil {
			t.Error("second Start: got nil, want an error")
		}
	})
}

func TestStartEnds(t *testing.T) {
	tests := []struct {
		name string
		push func() source.PushFunc[string] // called in the bubble
		want error                          // what Start's error wraps
	}{
		{"ctx cancelled", func() source.PushFunc[string] { return (&fakeDriver{gate: make(chan struct{})}).push }, context.Canceled},
		{"push fails", func() source.PushFunc[string] {
			return func(context.Context, source.Block[string]) (batch.BlockInfo, error) {
				return batch.BlockInfo{}, errBoom
			}
		}, errBoom},
		{"nil push", func() source.PushFunc[string] { return nil }, source.ErrInvalidRuntime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := mustNew(t, memory.Config{})
				ctx, cancel := context.WithCancel(t.Context())
				src.Push("a")
				startErr := start(ctx, src, source.Runtime[string]{Push: tt.push(), BlockInterval: 10 * time.Millisecond})
				time.Sleep(time.Minute) // the block is sealed; retries are over
				cancel()
				if err := <-startErr; !errors.Is(err, tt.want) {
					t.Fatalf("Start: got %v, want an error wrapping %v", err, tt.want)
				}
				if err := src.Send(t.Context(), "b"); !errors.Is(err, source.ErrStopped) {
					t.Errorf("Send after Start returned: got %v, want ErrStopped", err)
				}
				if err := src.Stop(t.Context()); err != nil {
					t.Errorf("Stop after Start returned: %v", err)
				}
			})
		})
	}
}

var errBoom = errors.New("boom")

// isBlocked reports whether errc, of capacity 1, has no result yet.
func isBlocked(errc <-chan error) bool { return len(errc) == 0 }

func TestSendWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Millisecond
		src := mustNew(t, memory.Config{MaxQueued: 4})
		d := &fakeDriver{gate: make(chan struct{})}
		ctx := t.Context()
		startErr := start(ctx, src, source.Runtime[string]{Push: d.push, BlockInterval: interval})

		// Five records queued: more than MaxQueued, so the next Send waits.
		if err := src.Send(ctx, "a", "b", "c", "d", "e"); err != nil {
			t.Fatalf("Send: %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancelled := make(chan error, 1)
		go func() { cancelled <- src.Send(cctx, "x") }()
		synctest.Wait()
		if !isBlocked(cancelled) {
			t.Fatal("Send returned while more than MaxQueued records are unstored")
		}
		cancel()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Fatalf("Send after cancel: got %v, want context.Canceled", err)
		}

		src.Push("f") // Push never waits
		waiting := make(chan error, 1)
		go func() { waiting <- src.Send(ctx, "g") }()
		time.Sleep(interval) // the block is sealed; its push waits at the gate
		synctest.Wait()
		if !isBlocked(waiting) {
			t.Fatal("Send returned before the block was stored")
		}
		d.gate <- struct{}{}
		if err := <-waiting; err != nil {
			t.Fatalf("Send once the block was stored: %v", err)
		}
		close(d.gate)
		if err := src.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-startErr; err != nil {
			t.Fatalf("Start: %v", err)
		}
		blocks, _ := d.snapshot()
		var got []string
		for _, b := range blocks {
			got = append(got, b.Records...)
		}
		if diff := cmp.Diff([]string{"a", "b", "c", "d", "e", "f", "g"}, got); diff != "" {
			t.Errorf("delivered (-want +got):\n%s", diff)
		}
	})
}

func TestRecompute(t *testing.T) {
	src := mustNew(t, memory.Config{Shards: 3, Retain: 3})
	src.Push("a", "b", "c", "d", "e") // shard 0, 1..5; 3..5 retained
	src.Push("x")                     // shard 1, 1..1
	s0, s1, s2 := memory.ShardName(0), memory.ShardName(1), memory.ShardName(2)
	rng := func(shard, first, last string, count int) batch.SeqRange {
		return batch.SeqRange{Stream: "memory", Shard: shard, First: first, Last: last, Count: count}
	}
	notHeld := func(r batch.SeqRange, oldest, newest string) error {
		return &memory.RangeNotHeldError{Range: r, Oldest: oldest, Newest: newest}
	}
	huge := strings.Repeat("9", 30)
	tests := []struct {
		name    string
		info    batch.BlockInfo
		want    []string
		wantErr error // matched with errors.Is, or compared if a *RangeNotHeldError
	}{
		{"held", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s1, "1", "1", 1), rng(s0, "3", "5", 3)}, Count: 4}, []string{"x", "c", "d", "e"}, nil},
		{"count not checked when 0", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s0, "4", "4", 1)}}, []string{"d"}, nil},
		{"dropped by retention", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s0, "1", "2", 2)}}, nil, notHeld(rng(s0, "1", "2", 2), "3", "5")},
		{"partly dropped", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s0, "2", "4", 3)}}, nil, notHeld(rng(s0, "2", "4", 3), "3", "5")},
		{"not pushed yet", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s1, "1", "2", 2)}}, nil, notHeld(rng(s1, "1", "2", 2), "1", "1")},
		{"empty shard", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s2, "1", "1", 1)}}, nil, notHeld(rng(s2, "1", "1", 1), "", "")},
		{"beyond 64 bits", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s0, huge, huge, 1)}}, nil, notHeld(rng(s0, huge, huge, 1), "3", "5")},
		{"other stream", batch.BlockInfo{Ranges: []batch.SeqRange{{Stream: "other", Shard: s0, First: "3", Last: "3", Count: 1}}}, nil, memory.ErrBadRange},
		{"unknown shard", batch.BlockInfo{Ranges: []batch.SeqRange{rng("shard-9", "3", "3", 1)}}, nil, memory.ErrBadRange},
		{"bad sequence number", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s0, "03", "4", 2)}}, nil, memory.ErrBadRange},
		{"first after last", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s0, "5", "4", 2)}}, nil, memory.ErrBadRange},
		{"range count wrong", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s0, "3", "5", 2)}}, nil, memory.ErrBadRange},
		{"block count wrong", batch.BlockInfo{Ranges: []batch.SeqRange{rng(s0, "3", "5", 3)}, Count: 4}, nil, memory.ErrBadRange},
		{"records without ranges", batch.BlockInfo{Count: 2}, nil, memory.ErrBadRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := src.Recompute(t.Context(), tt.info)
			var wantNH, gotNH *memory.RangeNotHeldError
			switch {
			case errors.As(tt.wantErr, &wantNH):
				if !errors.As(err, &gotNH) {
					t.Fatalf("got error %v, want a *RangeNotHeldError", err)
				}
				if diff := cmp.Diff(wantNH, gotNH); diff != "" {
					t.Errorf("RangeNotHeldError (-want +got):\n%s", diff)
				}
			case !errors.Is(err, tt.wantErr):
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
		})
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := src.Recompute(ctx, tests[0].info); !errors.Is(err, context.Canceled) {
		t.Errorf("Recompute with a done ctx: got %v, want context.Canceled", err)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  memory.Config
		want []string // each in the error; none means valid
	}{
		{"zero", memory.Config{}, nil},
		{"set", memory.Config{Name: "s", Shards: 4, MaxQueued: 1, Retain: 100}, nil},
		{"negative shards", memory.Config{Shards: -1}, []string{"Shards -1"}},
		{"most shards", memory.Config{Shards: memory.MaxShards}, nil},
		{"too many shards", memory.Config{Shards: memory.MaxShards + 1}, []string{"Shards 10001", "<= 10000"}},
		{"absurd shards", memory.Config{Shards: 1 << 40}, []string{"Shards 1099511627776"}},
		{"all bad", memory.Config{Shards: -1, MaxQueued: -2, Retain: -3}, []string{"Shards -1", "MaxQueued -2", "Retain -3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := memory.New[int](tt.cfg)
			if len(tt.want) == 0 {
				if err != nil || src == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, memory.ErrInvalidConfig) {
				t.Fatalf("New: got %v, want ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestShards(t *testing.T) {
	src := mustNew(t, memory.Config{Shards: 2})
	want := []string{"shardId-000000000000", "shardId-000000000001"}
	if diff := cmp.Diff(want, src.Shards()); diff != "" {
		t.Errorf("Shards (-want +got):\n%s", diff)
	}
}

// Source implements the receiver contract.
var _ source.Receiver[string] = (*memory.Source[string])(nil)

func TestConcurrentProducers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := mustNew(t, memory.Config{Shards: 4, MaxQueued: 20})
		d := &fakeDriver{}
		ctx := t.Context()
		startErr := start(ctx, src, source.Runtime[string]{Push: d.push, BlockInterval: 5 * time.Millisecond})
		const producers, calls = 6, 50
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for c := range calls {
					recs := []string{fmt.Sprintf("p%d-c%d-0", p, c), fmt.Sprintf("p%d-c%d-1", p, c)}
					if c%2 == 0 {
						src.Push(recs...)
					} else if err := src.Send(ctx, recs...); err != nil {
						t.Errorf("Send: %v", err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		if err := src.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := <-startErr; err != nil {
			t.Fatalf("Start: %v", err)
		}
		blocks, infos := d.snapshot()
		seen := map[string]int{}
		for i, b := range blocks {
			rec, err := src.Recompute(ctx, infos[i])
			if err != nil {
				t.Fatalf("Recompute block %d: %v", i, err)
			}
			if diff := cmp.Diff(b.Records, rec); diff != "" {
				t.Errorf("Recompute block %d (-want +got):\n%s", i, diff)
			}
			for _, r := range b.Records {
				seen[r]++
			}
		}
		if len(seen) != producers*calls*2 {
			t.Errorf("delivered %d distinct records, want %d", len(seen), producers*calls*2)
		}
		for r, n := range seen {
			if n != 1 {
				t.Errorf("record %s delivered %d times", r, n)
			}
		}
	})
}
