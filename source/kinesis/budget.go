package kinesis

import (
	"context"
	"sync"
	"unsafe"

	"github.com/weirstream/weir/batch"
)

// recordOverhead is what a Record costs in memory besides the bytes of its
// strings and data: the struct itself, held in a block's slice.
const recordOverhead = int64(unsafe.Sizeof(Record{}))

// recordBytes is the memory one Record holds, as the byte budget counts it.
func recordBytes(r *Record) int64 {
	return recordOverhead + int64(len(r.Data)+len(r.PartitionKey)+len(r.ExplicitHashKey)+len(r.SequenceNumber))
}

// budget bounds the bytes of the records a receiver read and the driver has
// not completed yet (Config.MaxBufferedBytes): a reader waits for room
// before it reads, the records it delivers take their bytes, and they give
// them back when the driver reports their block completed
// (Receiver.BlocksCompleted). Nothing is ever dropped: a full budget only
// stops reading. It is safe for concurrent use.
//
// Bytes are held per range (one GetRecords page of one shard), so a
// completion gives back exactly what its ranges took; a range the receiver
// did not deliver (a block recomputed after a restart) gives back nothing.
type budget struct {
	max int64 // <= 0: no limit, only counting

	mu      sync.Mutex
	used    int64
	peak    int64
	held    map[rangeKey][]int64 // bytes of delivered ranges not yet completed; a range read twice holds twice
	changed chan struct{}        // closed and replaced when bytes are given back
}

// rangeKey identifies a range among those a receiver delivered.
type rangeKey struct {
	shard, first, last string
}

func keyOf(r batch.SeqRange) rangeKey { return rangeKey{r.Shard, r.First, r.Last} }

func newBudget(max int64) *budget {
	return &budget{max: max, held: make(map[rangeKey][]int64), changed: make(chan struct{})}
}

// room returns the bytes left under the budget (a large number without a
// limit; 0 when full or over).
func (b *budget) room() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.roomLocked()
}

func (b *budget) roomLocked() int64 {
	if b.max <= 0 {
		return 1 << 62
	}
	return max(b.max-b.used, 0)
}

// wait returns once want bytes fit in the budget, or nothing is held (a page
// larger than the whole budget is still read, alone), or ctx is done (then
// it returns ctx.Err()).
func (b *budget) wait(ctx context.Context, want int64) error {
	for {
		b.mu.Lock()
		if b.max <= 0 || b.used == 0 || b.used+want <= b.max {
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take holds n bytes for a delivered range, whether or not they fit: the
// reader waited for room before reading, and a page is never dropped.
func (b *budget) take(r batch.SeqRange, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := keyOf(r)
	b.held[k] = append(b.held[k], n)
	b.used += n
	b.peak = max(b.peak, b.used)
}

// giveBack releases the bytes held for each of ranges (once per range
// given), and wakes the readers waiting for room.
func (b *budget) giveBack(ranges []batch.SeqRange) {
	b.mu.Lock()
	freed := false
	for _, r := range ranges {
		k := keyOf(r)
		hs := b.held[k]
		if len(hs) == 0 {
			continue
		}
		b.used -= hs[0]
		freed = true
		if len(hs) == 1 {
			delete(b.held, k)
		} else {
			b.held[k] = hs[1:]
		}
	}
	if freed {
		close(b.changed)
		b.changed = make(chan struct{})
	}
	b.mu.Unlock()
}

// usage returns the bytes held now and the most ever held.
func (b *budget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// readLimit returns the Limit of a reader's next GetRecords call: at most
// perRead records, and no more than the room left holds at avg bytes a
// record (the reader's last page; 0 when unknown), but at least one.
func readLimit(perRead int, room, avg int64) int {
	if avg <= 0 {
		return perRead
	}
	return int(max(min(int64(perRead), room/avg), 1))
}
