package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/source/memory"
)

// TestQuarantineBeforeForEachBatchWithOrigins checks that narrow operators
// before a ForEachBatch with Origins (as sink/kinesis and sink/dynamodb
// are used) that fail on a record do not stop a pipeline whose output
// quarantines: each failing source record is quarantined with its range
// and offset, none of its outputs is given to f, not even those made
// before the failure, and f gets every other record's outputs once, with
// the origins a run without failure gives them (index in the FlatMap's
// output included), so that exactly-once versions stay right. Without
// Origins, the same records are quarantined and output.
func TestQuarantineBeforeForEachBatchWithOrigins(t *testing.T) {
	for _, origins := range []bool{true, false} {
		t.Run(map[bool]string{true: "origins", false: "no origins"}[origins], func(t *testing.T) {
			testQuarantineBeforeForEachBatch(t, origins)
		})
	}
}

func testQuarantineBeforeForEachBatch(t *testing.T, withOrigins bool) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n = 3, 600
		// bad1's first output fails the Map; bad2's second output fails
		// the second FlatMap, after its first went through.
		bad1, bad2 := posRec{Shard: 1, Seq: 40}, posRec{Shard: 2, Seq: 71}
		p, err := NewPipeline(Config{Parallelism: 2, BatchInterval: 50 * time.Millisecond, BlockInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		src, err := memory.New[posRec](memory.Config{Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		fanned := FlatMap(From(p, src), func(r posRec) []fanRec {
			out := make([]fanRec, r.Seq%3+1)
			for k := range out {
				out[k] = fanRec{r, k}
			}
			return out
		})
		again := FlatMap(fanned, func(r fanRec) []fanRec {
			if r.posRec == bad2 && r.K == 1 {
				panic("kaboom 2")
			}
			return []fanRec{r}
		})
		final := Map(again, func(r fanRec) fanRec {
			if r.posRec == bad1 && r.K == 0 {
				panic("kaboom 1")
			}
			return r
		})
		seen := map[fanRec]int{}
		var wrong []string
		box := &letterBox{}
		ForEachBatch(final, func(_ context.Context, b *batch.Batch[fanRec]) error {
			origins := b.Origins()
			if !withOrigins {
				if origins != nil {
					wrong = append(wrong, "origins given without the option")
				}
				origins = make([]batch.Origin, b.Len())
				for i, v := range slices.Collect(b.All()) {
					origins[i] = batch.Origin{Stream: "memory", Shard: memory.ShardName(v.Shard), Seq: strconv.Itoa(v.Seq + 1), SubSeq: int64(v.Seq % 3), Index: v.K}
				}
			}
			if b.Len() > 0 && len(origins) != b.Len() {
				wrong = append(wrong, fmt.Sprintf("batch %v: %d records, %d origins", b.Time(), b.Len(), len(origins)))
				return nil
			}
			i := 0
			for v := range b.All() {
				want := batch.Origin{Stream: "memory", Shard: memory.ShardName(v.Shard), Seq: strconv.Itoa(v.Seq + 1), SubSeq: int64(v.Seq % 3), Index: v.K}
				if origins[i] != want {
					wrong = append(wrong, fmt.Sprintf("record %+v: origin %+v, want %+v", v, origins[i], want))
				}
				seen[v]++
				i++
			}
			return nil
		}, append([]Option{Quarantine(box), Retry(0)}, map[bool][]Option{true: {Origins()}}[withOrigins]...)...)

		errc := make(chan error, 1)
		go func() { errc <- p.Run(t.Context()) }()
		for i := range n {
			if src.Push(posRec{i % shards, i / shards}) != nil {
				break // Run stopped: its error says why
			}
			if i%37 == 0 {
				time.Sleep(7 * time.Millisecond)
			}
		}
		p.Drain(context.Background())
		if err := <-errc; err != nil {
			t.Fatalf("Run = %v, want nil: the failing records quarantined", err)
		}
		if len(wrong) > 0 {
			t.Fatalf("%d wrong origins, first %s", len(wrong), wrong[0])
		}
		for i := range n {
			r := posRec{i % shards, i / shards}
			want := 1
			if r == bad1 || r == bad2 {
				want = 0
			}
			for k := range r.Seq%3 + 1 {
				if got := seen[fanRec{r, k}]; got != want {
					t.Errorf("output %d of %+v given %d times, want %d", k, r, got, want)
				}
			}
		}
		letters := box.all()
		if len(letters) != 2 {
			t.Fatalf("%d letters, want 2: %+v", len(letters), letters)
		}
		for _, bad := range []struct {
			r     posRec
			panic string
		}{{bad1, "kaboom 1"}, {bad2, "kaboom 2"}} {
			want, _ := json.Marshal(bad.r)
			found := false
			for _, l := range letters {
				if string(l.Record) != string(want) {
					continue
				}
				found = true
				first, _ := strconv.Atoi(l.Range.First)
				if l.Panic != bad.panic || l.Range.Shard != memory.ShardName(bad.r.Shard) || first+l.Offset != bad.r.Seq+1 {
					t.Errorf("letter of %+v: panic %q, range %+v offset %d; want %q, the record's shard and sequence number %d",
						bad.r, l.Panic, l.Range, l.Offset, bad.panic, bad.r.Seq+1)
				}
			}
			if !found {
				t.Errorf("no letter for %+v: %+v", bad.r, letters)
			}
		}
	})
}

// TestQuarantinePartitionDropsPartialOutputs checks that the quarantine
// pass of a ForEachPartition gives f none of the outputs of a record whose
// processing failed, not even those a FlatMap made of it before the next
// operator failed on another of them: the record is quarantined alone.
func TestQuarantinePartitionDropsPartialOutputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n = 2, 100
		bad := shardRec{Shard: 1, Seq: 20}
		p, src := newMemoryPipeline(t, Config{Parallelism: 2}, shards)
		fanned := FlatMap(From(p, src), func(v shardRec) []fanRec {
			return []fanRec{{posRec(v), 0}, {posRec(v), 1}}
		})
		again := FlatMap(fanned, func(r fanRec) []fanRec {
			if shardRec(r.posRec) == bad && r.K == 1 {
				panic("kaboom")
			}
			return []fanRec{r}
		})
		seen := map[fanRec]int{}
		var mu sync.Mutex
		box := &letterBox{}
		ForEachPartition(again, func(_ context.Context, part Partition[fanRec]) error {
			mu.Lock()
			defer mu.Unlock()
			for v := range part.All() {
				seen[v]++
			}
			return nil
		}, Quarantine(box), Retry(0))
		if err := runMemory(t, p, src, shards, n); err != nil {
			t.Fatalf("Run = %v, want nil: the bad record quarantined", err)
		}
		for k := range n {
			v := shardRec{k % shards, k / shards}
			want := map[bool]int{true: 0, false: 1}[v == bad]
			for i := range 2 {
				if got := seen[fanRec{posRec(v), i}]; got != want {
					t.Errorf("output %d of %v given %d times, want %d", i, v, got, want)
				}
			}
		}
		if letters := box.all(); len(letters) != 1 || letters[0].Panic != "kaboom" {
			t.Errorf("letters %+v, want the bad record's", letters)
		}
	})
}

// TestQuarantineForEachWithholdsPartialOutputs checks what a ForEach with
// Quarantine gives f of a record that is quarantined after it made several
// outputs (a FlatMap of two): in the quarantine pass, none of them, whether
// the FlatMap after it or f itself fails on one; before it, the
// try that first failed in the partition gave f, one by one, the outputs
// made before the failure, which stay output (ForEach streams).
func TestQuarantineForEachWithholdsPartialOutputs(t *testing.T) {
	for _, failIn := range []string{"FlatMap", "ForEach"} {
		t.Run(failIn, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const shards, n = 2, 100
				// Both bad records are of shard 1, in one batch: the
				// first try of its partition fails on bad1, the
				// quarantine pass isolates bad1 and bad2.
				bad1, bad2 := posRec{Shard: 1, Seq: 10}, posRec{Shard: 1, Seq: 30}
				isBad := func(r fanRec) bool { return r.posRec == bad1 || r.posRec == bad2 }
				p, err := NewPipeline(Config{Parallelism: 2})
				if err != nil {
					t.Fatal(err)
				}
				src, err := memory.New[posRec](memory.Config{Shards: shards})
				if err != nil {
					t.Fatal(err)
				}
				fanned := FlatMap(From(p, src), func(v posRec) []fanRec { return []fanRec{{v, 0}, {v, 1}} })
				// A FlatMap passes each output on alone, so the first
				// reaches ForEach before the second fails (a Map would
				// fail on the chunk of both first).
				mapped := FlatMap(fanned, func(r fanRec) []fanRec {
					if failIn == "FlatMap" && isBad(r) && r.K == 1 {
						panic("kaboom")
					}
					return []fanRec{r}
				})
				var mu sync.Mutex
				seen := map[fanRec]int{}
				box := &letterBox{}
				ForEach(mapped, func(_ context.Context, r fanRec) error {
					if failIn == "ForEach" && isBad(r) && r.K == 0 {
						return fmt.Errorf("refused %v", r)
					}
					mu.Lock()
					defer mu.Unlock()
					seen[r]++
					return nil
				}, Quarantine(box), Retry(0))
				errc := make(chan error, 1)
				go func() { errc <- p.Run(t.Context()) }()
				for i := range n {
					if err := src.Push(posRec{i % shards, i / shards}); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.Drain(context.Background()); err != nil {
					t.Fatalf("Drain: %v", err)
				}
				if err := <-errc; err != nil {
					t.Fatalf("Run = %v, want nil: the bad records quarantined", err)
				}
				for k := range n {
					v := posRec{k % shards, k / shards}
					for i := range 2 {
						want := 1
						switch {
						case v == bad1 && i == 0 && failIn == "FlatMap":
							want = 1 // given by the first try, before its second failed
						case v == bad1 || v == bad2:
							want = 0
						}
						if got := seen[fanRec{v, i}]; got != want {
							t.Errorf("output %d of %v given %d times, want %d", i, v, got, want)
						}
					}
				}
				if letters := box.all(); len(letters) != 2 {
					t.Errorf("%d letters, want bad1's and bad2's: %+v", len(letters), letters)
				}
			})
		})
	}
}

// TestForEachBatchLettersNameOrigins checks that the letters of a
// ForEachBatch with Origins and Quarantine say where each record was
// read: those of the records its function refuses with RecordErrors (the
// two a FlatMap made of one source record included), and those of the
// batch it panics on, quarantined whole, each name the record's origin,
// Range.First and Last its sequence number, Count its sub-sequence number
// plus 1 and Offset its sub-sequence number. Without Origins the batch has
// none, and a letter no range.
func TestForEachBatchLettersNameOrigins(t *testing.T) {
	for _, withOrigins := range []bool{true, false} {
		t.Run(map[bool]string{true: "origins", false: "no origins"}[withOrigins], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const shards, n = 3, 300
				panicOn := posRec{Shard: 2, Seq: 95}
				refused := func(r fanRec) bool { return r.Seq%10 == 3 }
				p, src := newMemoryPipelineOf[posRec](t, Config{Parallelism: 2, BatchInterval: 50 * time.Millisecond, BlockInterval: 10 * time.Millisecond}, shards)
				fanned := FlatMap(From(p, src), func(r posRec) []fanRec { return []fanRec{{r, 0}, {r, 1}} })
				box := &letterBox{}
				ForEachBatch(fanned, func(_ context.Context, b *batch.Batch[fanRec]) error {
					re := &RecordErrors{Errs: map[int]error{}}
					i := 0
					for v := range b.All() {
						if v.posRec == panicOn {
							panic("kaboom")
						}
						if refused(v) {
							re.Errs[i] = errRefused
						}
						i++
					}
					if len(re.Errs) > 0 {
						return re
					}
					return nil
				}, append([]Option{Quarantine(box), Retry(0)}, map[bool][]Option{true: {Origins()}}[withOrigins]...)...)
				if err := runMemory(t, p, src, shards, n); err != nil {
					t.Fatalf("Run = %v, want nil: the failing records quarantined", err)
				}
				letters := map[fanRec]int{}
				for _, l := range box.all() {
					var r fanRec
					if err := json.Unmarshal(l.Record, &r); err != nil {
						t.Fatalf("letter record %q: %v", l.Record, err)
					}
					letters[r]++
					var want batch.SeqRange
					wantOffset := 0
					if withOrigins {
						seq, sub := r.Position()
						want = batch.SeqRange{Stream: "memory", Shard: memory.ShardName(r.Shard), First: seq, Last: seq, Count: int(sub) + 1}
						wantOffset = int(sub)
					}
					if diff := cmp.Diff(want, l.Range); diff != "" || l.Offset != wantOffset {
						t.Errorf("letter of %+v (%s): offset %d, want %d; range (-want +got):\n%s", r, l.Err, l.Offset, wantOffset, diff)
					}
					if l.Panic != "kaboom" && (!refused(r) || l.Err != errRefused.Error()) {
						t.Errorf("letter of %+v: err %q panic %q, want a refusal or the panic", r, l.Err, l.Panic)
					}
				}
				// A failing record has one letter; another, one if its
				// batch was quarantined whole (the panic's), else none.
				for i := range n {
					for k := range 2 {
						r := fanRec{posRec{i % shards, i / shards}, k}
						failing := refused(r) || r.posRec == panicOn
						if got := letters[r]; got > 1 || failing && got != 1 {
							t.Errorf("%d letters of %+v (failing: %v), want 1 at most, and 1 if failing", got, r, failing)
						}
					}
				}
			})
		})
	}
}
