package stream

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/batch"
)

// TestOriginsOutputAfterSharedKeyedOperator runs a ReduceByKey with
// Quarantine, after a Map, whose stream two outputs share, the second with
// Origins or without; the Map's function panics on one record. The
// ReduceByKey's batch is computed once, for the first output, and kept: its
// records have no origins, so Origins on the second output must change
// nothing. Planning for origins once planned the kept result again, so the
// map side ran twice: the Map's function (and reduce) was called again for
// every record, and the failing record was quarantined twice.
func TestOriginsOutputAfterSharedKeyedOperator(t *testing.T) {
	run := func(origins bool) (calls int64, quarantines int) {
		synctest.Test(t, func(t *testing.T) {
			const shards, n = 2, 40
			p, src := newMemoryPipeline(t, Config{Parallelism: 2, BatchInterval: 50 * time.Millisecond, BlockInterval: 10 * time.Millisecond}, shards)
			bad := shardRec{1, 5}
			var c atomic.Int64
			m := Map(From(p, src), func(r shardRec) Pair[int, int] {
				c.Add(1)
				if r == bad {
					panic("bad")
				}
				return Pair[int, int]{Key: r.Seq % 3, Value: 1}
			})
			box := &letterBox{}
			red := ReduceByKey(m, func(a, b int) int { return a + b }, Quarantine(box))
			ForEachBatch(red, func(context.Context, *batch.Batch[Pair[int, int]]) error { return nil })
			var opts []Option
			if origins {
				opts = append(opts, Origins())
			}
			ForEachBatch(red, func(context.Context, *batch.Batch[Pair[int, int]]) error { return nil }, opts...)
			if err := runMemory(t, p, src, shards, n); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			box.mu.Lock()
			defer box.mu.Unlock()
			calls, quarantines = c.Load(), box.calls
		})
		return calls, quarantines
	}
	wantCalls, wantQ := run(false)
	if wantQ != 1 {
		t.Fatalf("without Origins: DeadLetters.Quarantine called %d times, want 1", wantQ)
	}
	calls, q := run(true)
	if calls != wantCalls {
		t.Errorf("with Origins on the second output, the Map's function was called %d times, want %d as without: the ReduceByKey's map side ran again", calls, wantCalls)
	}
	if q != 1 {
		t.Errorf("with Origins on the second output, DeadLetters.Quarantine was called %d times, want 1: the record is quarantined once per run of the map side", q)
	}
}
