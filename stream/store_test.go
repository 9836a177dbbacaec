package stream

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
)

// storeOp is one call on a Store: put records (nil records included), or
// delete ids.
type storeOp struct {
	put     bool
	id      batch.BlockID
	records []string
	del     []batch.BlockID
}

func put(id batch.BlockID, records ...string) storeOp {
	return storeOp{put: true, id: id, records: records}
}

func del(ids ...batch.BlockID) storeOp { return storeOp{del: ids} }

// storeView is everything a Store answers about a set of IDs.
type storeView struct {
	Blocks, Records int
	Held            map[batch.BlockID][]string
}

func view(s *blockStore[string], ids []batch.BlockID) storeView {
	v := storeView{Held: map[batch.BlockID][]string{}}
	v.Blocks, v.Records = s.Len()
	for _, id := range ids {
		if r, ok := s.Get(id); ok {
			v.Held[id] = r
		}
	}
	return v
}

func TestStore(t *testing.T) {
	a, b, c := batch.BlockID{Source: 0, Seq: 1}, batch.BlockID{Source: 0, Seq: 2}, batch.BlockID{Source: 1, Seq: 1}
	all := []batch.BlockID{a, b, c}
	tests := []struct {
		name string
		ops  []storeOp
		want storeView
	}{
		{"zero value is empty", nil, storeView{Held: map[batch.BlockID][]string{}}},
		{"put", []storeOp{put(a, "x", "y"), put(c, "z")},
			storeView{Blocks: 2, Records: 3, Held: map[batch.BlockID][]string{a: {"x", "y"}, c: {"z"}}}},
		{"same seq of another source is another block", []storeOp{put(a, "x"), put(c, "y")},
			storeView{Blocks: 2, Records: 2, Held: map[batch.BlockID][]string{a: {"x"}, c: {"y"}}}},
		{"put replaces and recounts", []storeOp{put(a, "x", "y", "z"), put(a, "w")},
			storeView{Blocks: 1, Records: 1, Held: map[batch.BlockID][]string{a: {"w"}}}},
		{"an empty block is held", []storeOp{put(a)},
			storeView{Blocks: 1, Records: 0, Held: map[batch.BlockID][]string{a: nil}}},
		{"delete", []storeOp{put(a, "x"), put(b, "y", "z"), del(b)},
			storeView{Blocks: 1, Records: 1, Held: map[batch.BlockID][]string{a: {"x"}}}},
		{"delete of several, absent ones ignored", []storeOp{put(a, "x"), put(b, "y"), del(a, c, b, a)},
			storeView{Held: map[batch.BlockID][]string{}}},
		{"delete of nothing", []storeOp{put(a, "x"), del()},
			storeView{Blocks: 1, Records: 1, Held: map[batch.BlockID][]string{a: {"x"}}}},
		{"put after delete", []storeOp{put(a, "x"), del(a), put(a, "y", "z")},
			storeView{Blocks: 1, Records: 2, Held: map[batch.BlockID][]string{a: {"y", "z"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s blockStore[string]
			for _, op := range tt.ops {
				if op.put {
					s.Put(op.id, op.records)
				} else {
					s.Delete(op.del...)
				}
			}
			if diff := cmp.Diff(tt.want, view(&s, all)); diff != "" {
				t.Errorf("store after %d ops (-want +got):\n%s", len(tt.ops), diff)
			}
		})
	}
}

// TestStoreConcurrentUse has writers put, read and delete their own blocks
// while readers count: under -race this checks the locking, and the final
// counts check that no update was lost.
func TestStoreConcurrentUse(t *testing.T) {
	var s blockStore[int]
	const writers, blocks = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range blocks {
				id := batch.BlockID{Source: w, Seq: uint64(i)}
				s.Put(id, make([]int, i%5))
				if r, ok := s.Get(id); !ok || len(r) != i%5 {
					t.Errorf("Get(%v) = %d records, %v; want %d, true", id, len(r), ok, i%5)
				}
				if i%2 == 1 { // keep the even blocks
					s.Delete(id)
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, recs := s.Len(); n < 0 || recs < 0 || recs > 4*n {
				t.Errorf("Len() = %d blocks, %d records: inconsistent", n, recs)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()

	wantRecords := 0
	for i := 0; i < blocks; i += 2 {
		wantRecords += i % 5
	}
	wantRecords *= writers
	gotBlocks, gotRecords := s.Len()
	if diff := cmp.Diff(fmt.Sprint(writers*blocks/2, " blocks, ", wantRecords, " records"),
		fmt.Sprint(gotBlocks, " blocks, ", gotRecords, " records")); diff != "" {
		t.Errorf("Len() after concurrent use (-want +got):\n%s", diff)
	}
}
