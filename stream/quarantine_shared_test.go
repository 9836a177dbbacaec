package stream

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

// TestQuarantineSharedStream checks that a narrow operator whose stream
// several outputs share (computed once, before them), or several chains
// of narrow operators do, and whose function panics on one record does
// not stop a pipeline whose outputs quarantine: each output quarantines
// the record, with its origin, and outputs every other record once.
func TestQuarantineSharedStream(t *testing.T) {
	for _, chains := range []bool{false, true} {
		t.Run(map[bool]string{false: "outputs share", true: "chains share"}[chains], func(t *testing.T) {
			testQuarantineSharedStream(t, chains)
		})
	}
}

func testQuarantineSharedStream(t *testing.T, chains bool) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n = 4, 400
		bad := shardRec{Shard: 1, Seq: 80}
		p, src := newMemoryPipeline(t, Config{Parallelism: 4}, shards)
		m := Map(From(p, src), func(v shardRec) shardRec {
			if v == bad {
				panic("kaboom")
			}
			return v
		})
		var mu sync.Mutex
		seen := [2]map[shardRec]int{{}, {}}
		boxes := [2]*letterBox{{}, {}}
		for i := range 2 {
			in := m
			if chains {
				in = Filter(m, func(shardRec) bool { return true })
			}
			ForEach(in, func(_ context.Context, v shardRec) error {
				mu.Lock()
				defer mu.Unlock()
				seen[i][v]++
				return nil
			}, Quarantine(boxes[i]), Retry(1))
		}
		if err := runMemory(t, p, src, shards, n); err != nil {
			t.Fatalf("Run = %v, want nil: the bad record quarantined by both outputs", err)
		}
		want, _ := json.Marshal(bad)
		wantRange := batch.SeqRange{Stream: "memory", Shard: "shardId-000000000001", First: "81", Last: "81", Count: 1}
		for i := range 2 {
			for k := range n {
				v := shardRec{k % shards, k / shards}
				if w := map[bool]int{true: 0, false: 1}[v == bad]; seen[i][v] != w {
					t.Errorf("output %d: record %v output %d times, want %d", i, v, seen[i][v], w)
				}
			}
			letters := boxes[i].all()
			if len(letters) != 1 {
				t.Fatalf("output %d: %d letters, want 1: %+v", i, len(letters), letters)
			}
			l := letters[0]
			if string(l.Record) != string(want) || l.Panic != "kaboom" || l.Output != i {
				t.Errorf("output %d: letter record %s panic %q output %d, want %s, kaboom, %d", i, l.Record, l.Panic, l.Output, want, i)
			}
			if diff := cmp.Diff(wantRange, l.Range); diff != "" {
				t.Errorf("output %d: letter range (-want +got):\n%s", i, diff)
			}
		}
	})
}

// TestQuarantineBeforeForEachBatch checks that a narrow operator before a
// ForEachBatch that quarantines, whose function panics on one record, does
// not stop the pipeline: the record is quarantined with its origin and f
// gets the batch of the others.
func TestQuarantineBeforeForEachBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n = 4, 400
		bad := shardRec{Shard: 1, Seq: 80}
		p, src := newMemoryPipeline(t, Config{Parallelism: 4}, shards)
		m := Map(From(p, src), func(v shardRec) shardRec {
			if v == bad {
				panic("kaboom")
			}
			return v
		})
		seen := map[shardRec]int{}
		box := &letterBox{}
		ForEachBatch(m, func(_ context.Context, b *batch.Batch[shardRec]) error {
			for v := range b.All() {
				seen[v]++
			}
			return nil
		}, Quarantine(box), Retry(1))
		if err := runMemory(t, p, src, shards, n); err != nil {
			t.Fatalf("Run = %v, want nil: the bad record quarantined", err)
		}
		for k := range n {
			v := shardRec{k % shards, k / shards}
			if w := map[bool]int{true: 0, false: 1}[v == bad]; seen[v] != w {
				t.Errorf("record %v output %d times, want %d", v, seen[v], w)
			}
		}
		letters := box.all()
		if len(letters) != 1 {
			t.Fatalf("%d letters, want 1: %+v", len(letters), letters)
		}
		want, _ := json.Marshal(bad)
		wantRange := batch.SeqRange{Stream: "memory", Shard: "shardId-000000000001", First: "81", Last: "81", Count: 1}
		if l := letters[0]; string(l.Record) != string(want) || l.Panic != "kaboom" || !cmp.Equal(wantRange, l.Range) {
			t.Errorf("letter record %s panic %q range %+v, want %s, kaboom, %+v", l.Record, l.Panic, l.Range, want, wantRange)
		}
	})
}
