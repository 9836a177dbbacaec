package stream

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
)

// TestStopNamesTheRecord checks that a record on which an output's
// function keeps failing, without Quarantine, stops Run with an error that
// names the shard, the record where the engine can pin it (its sequence
// number, or its place in its range), and the fix: Quarantine.
func TestStopNamesTheRecord(t *testing.T) {
	const shards, n = 4, 400
	bad := shardRec{Shard: 1, Seq: 80} // the memory source's record 81 of shardId-000000000001
	boom := errors.New("boom")
	const fix = "stream.Quarantine"
	tests := []struct {
		name  string
		build func(s *Stream[shardRec])
		want  []string
	}{
		{"ForEach errs", func(s *Stream[shardRec]) {
			ForEach(s, func(_ context.Context, v shardRec) error {
				if v == bad {
					return boom
				}
				return nil
			}, Retry(0))
		}, []string{"shard shardId-000000000001", "81-81", "offset 0", fix}},
		{"ForEach panics", func(s *Stream[shardRec]) {
			ForEach(s, func(_ context.Context, v shardRec) error {
				if v == bad {
					panic("boom")
				}
				return nil
			}, Retry(1))
		}, []string{"shard shardId-000000000001", "81-81", fix}},
		{"Map panics", func(s *Stream[shardRec]) {
			m := Map(s, func(v shardRec) shardRec {
				if v == bad {
					panic("boom")
				}
				return v
			})
			ForEach(m, func(context.Context, shardRec) error { return nil }, Retry(0))
		}, []string{"shard shardId-000000000001", fix}},
		{"ForEachPartition errs", func(s *Stream[shardRec]) {
			ForEachPartition(s, func(_ context.Context, p Partition[shardRec]) error {
				for v := range p.All() {
					if v == bad {
						return boom
					}
				}
				return nil
			}, Retry(0))
		}, []string{"shard shardId-000000000001", fix}},
		{"ForEachBatch errs", func(s *Stream[shardRec]) {
			ForEachBatch(s, func(_ context.Context, b *batch.Batch[shardRec]) error {
				for v := range b.All() {
					if v == bad {
						return boom
					}
				}
				return nil
			}, Retry(0))
		}, []string{fix}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, src := newMemoryPipeline(t, Config{Parallelism: 4}, shards)
				tt.build(From(p, src))
				err := runMemory(t, p, src, shards, n)
				if _, ok := errors.AsType[*BatchError](err); !ok {
					t.Fatalf("Run = %v, want a *BatchError", err)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Run = %v\nwant it to name %q", err, w)
					}
				}
			})
		})
	}
	t.Run("Positioned record", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, err := NewPipeline(Config{Parallelism: 4})
			if err != nil {
				t.Fatal(err)
			}
			src, err := memory.New[posRec](memory.Config{Shards: shards})
			if err != nil {
				t.Fatal(err)
			}
			badPos := posRec{Shard: 1, Seq: 80}
			ForEach(From(p, src), func(_ context.Context, v posRec) error {
				if v == badPos {
					return boom
				}
				return nil
			}, Retry(0))
			errc := make(chan error, 1)
			go func() { errc <- p.Run(t.Context()) }()
			for i := range n {
				if err := src.Push(posRec{i % shards, i / shards}); err != nil {
					t.Fatal(err)
				}
			}
			p.Drain(context.Background())
			err = <-errc
			if !errors.Is(err, boom) {
				t.Fatalf("Run = %v, want boom", err)
			}
			for _, w := range []string{"shard shardId-000000000001", "sequence number 81, sub-sequence 2", fix} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run = %v\nwant it to name %q", err, w)
				}
			}
		})
	})
}

// TestKeyedStopNamesTheRecords checks that a narrow operator's function
// that panics on a record before a keyed, window or state operator stops
// the pipeline with an error naming the shard and the sequence numbers of
// the records it failed among, and the fix, as an output's failure does:
// it named only the keyed operator.
func TestKeyedStopNamesTheRecords(t *testing.T) {
	const shards, n = 4, 400
	bad := shardRec{Shard: 1, Seq: 80}
	pairs := func(s *Stream[shardRec]) *Stream[Pair[int, int]] {
		return Map(s, func(v shardRec) Pair[int, int] {
			if v == bad {
				panic("boom")
			}
			return Pair[int, int]{v.Shard, 1}
		})
	}
	sum := func(a, b int) int { return a + b }
	drop := func(context.Context, Pair[int, int]) error { return nil }
	tests := []struct {
		name  string
		build func(s *Stream[shardRec])
	}{
		{"ReduceByKey", func(s *Stream[shardRec]) { ForEach(ReduceByKey(pairs(s), sum), drop, Retry(0)) }},
		{"ReduceByKeyAndWindow", func(s *Stream[shardRec]) {
			ForEach(ReduceByKeyAndWindow(pairs(s), sum, nil, 2*time.Second, time.Second), drop, Retry(0))
		}},
		{"UpdateStateByKey", func(s *Stream[shardRec]) {
			ForEach(UpdateStateByKey(pairs(s), func(_ int, vs []int, n int, _ bool) (int, bool) { return n + len(vs), true }), drop, Retry(0))
		}},
		{"MapWithState", func(s *Stream[shardRec]) {
			out, _ := MapWithState(pairs(s), func(_ int, v int, st *State[int]) (int, bool) { return v, true })
			ForEach(out, func(context.Context, int) error { return nil }, Retry(0))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, src := newMemoryPipeline(t, Config{Parallelism: 4}, shards)
				tt.build(From(p, src))
				err := runMemory(t, p, src, shards, n)
				be, ok := errors.AsType[*BatchError](err)
				if !ok {
					t.Fatalf("Run = %v, want a *BatchError", err)
				}
				if be.Panic != "boom" {
					t.Errorf("BatchError.Panic = %v, want boom", be.Panic)
				}
				for _, w := range []string{"shard shardId-000000000001", "Map, Filter, FlatMap or MapBatch", "fix the function or the record"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Run = %v\nwant it to name %q", err, w)
					}
				}
			})
		})
	}
}
