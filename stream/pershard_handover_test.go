package stream_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirstream/weir/source"
	"github.com/weirstream/weir/stream"
)

// finalSave takes the last snapshot of a shard this worker stops reading,
// as the Kinesis receiver does at a hand-off, a drain and a shard's end:
// with the drop in the same step if the driver offers it, else a Snapshot
// (the receiver's Drop follows once the lease is handed off).
func finalSave(ctx context.Context, ss source.ShardState, sh source.Shard) ([]byte, string, error) {
	if f, ok := ss.(source.ShardStateHandOver); ok {
		return f.SnapshotAndDrop(ctx, sh)
	}
	return ss.Snapshot(ctx, sh)
}

// idle is an UpdateStateByKey state that closes its key after some batches
// without records.
type idle struct{ N, Idle int }

// A key timed out in a batch run after its shard's final snapshot and
// before its drop (a hand-off's last checkpoint and lease write, a drain's
// last checkpoints) is timed out once: by the shard's next owner, which
// loads the snapshot holding it. Before, the old owner timed it out too,
// calling the function and giving its output twice, as after a crash
// though the hand-off was clean. The same holds for an UpdateStateByKey
// closing idle keys (keep false), whose function runs for every key at
// every batch.
func TestStatePerShardFinalSaveTimesOutOnce(t *testing.T) {
	const iv = 10 * time.Millisecond // startSharded's batch interval
	for _, tc := range []struct {
		name  string
		build func(closed func(k string)) func(*stream.Pipeline, *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]]
	}{
		{"MapWithState StateTimeout", func(closed func(string)) func(*stream.Pipeline, *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
			return func(_ *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
				mapped, _ := stream.MapWithState(pairs, func(k string, v int, st *stream.State[int]) (stream.Pair[string, int], bool) {
					if st.IsTimingOut() {
						closed(k)
						return stream.Pair[string, int]{Key: k, Value: -1}, true
					}
					st.Update(st.Get() + v)
					return stream.Pair[string, int]{Key: k, Value: st.Get()}, true
				}, stream.StateTimeout(5*iv))
				return mapped
			}
		}},
		{"UpdateStateByKey keep false", func(closed func(string)) func(*stream.Pipeline, *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
			return func(_ *stream.Pipeline, pairs *stream.Stream[stream.Pair[string, int]]) *stream.Stream[stream.Pair[string, int]] {
				states := stream.UpdateStateByKey(pairs, func(k string, vs []int, st idle, _ bool) (idle, bool) {
					if len(vs) > 0 {
						return idle{N: st.N + len(vs)}, true
					}
					if st.Idle++; st.Idle == 5 {
						closed(k)
						return st, false
					}
					return st, true
				})
				return stream.Map(states, func(kv stream.Pair[string, idle]) stream.Pair[string, int] {
					return stream.Pair[string, int]{Key: kv.Key, Value: kv.Value.N}
				})
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				closes := map[string]int{} // by owner
				owner := "a"
				build := tc.build(func(string) {
					mu.Lock()
					defer mu.Unlock()
					closes[owner]++
				})
				key := keyIn(t, true)

				// a counts a record of shard lo, then hands the shard off:
				// its final snapshot, batches while the last checkpoint and
				// the lease are written, then its drop.
				a := startSharded(t, build)
				if err := a.ss.Load(a.ctx, loShard); err != nil {
					t.Fatal(err)
				}
				a.push("lo", 1, key)
				a.waitFor("a counts the record", map[string]int{key: 1})
				data, upTo, err := finalSave(a.ctx, a.ss, loShard)
				if err != nil || upTo != "1" {
					t.Fatalf("final snapshot of lo: upTo %q, %v; want 1", upTo, err)
				}
				time.Sleep(20 * iv) // past the key's timeout
				if err := a.ss.Drop(a.ctx, loShard); err != nil {
					t.Fatal(err)
				}
				a.drain()

				// b loads the snapshot and runs past the key's timeout.
				mu.Lock()
				owner = "b"
				mu.Unlock()
				b := startSharded(t, build)
				if err := b.ss.Load(b.ctx, loShard, data); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * iv)
				b.drain()

				mu.Lock()
				defer mu.Unlock()
				if closes["a"]+closes["b"] != 1 {
					t.Errorf("the key timed out %d times on the old owner and %d on the new, want once in all: "+
						"a batch after the old owner's final snapshot timed it out, and the new owner, loading the snapshot, again",
						closes["a"], closes["b"])
				}
			})
		})
	}
}
