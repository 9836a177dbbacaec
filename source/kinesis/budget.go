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
// not completed yet (source.Runtime.MaxBufferedBytes, set by Start: the
// receiver's share of stream.Config.MaxBufferedBytes; DESIGN.md, "Memory
// and flow control"). A reader reserves room for the page it is about to
// read, waiting while the budget is full; the records it delivers then
// hold their actual bytes in place of the reservation, until the driver
// reports their block completed (Receiver.blocksCompleted). Nothing is
// ever dropped: a full budget only stops reading. It is safe for
// concurrent use.
//
// Bytes are held per range (one GetRecords page of one shard), so a
// completion gives back exactly what its ranges took; a range the receiver
// did not deliver (a block recomputed after a restart) gives back nothing.
type budget struct {
	mu       sync.Mutex
	max      int64                // <= 0: no limit, only counting
	used     int64                // bytes of delivered records not yet completed
	reserved int64                // bytes reserved for pages being read
	peak     int64                // the most used has been
	held     map[rangeKey][]int64 // bytes of delivered ranges not yet completed; a range read twice holds twice
	changed  chan struct{}        // closed and replaced when bytes are given back
}

// rangeKey identifies a range among those a receiver delivered.
type rangeKey struct {
	shard, first, last string
}

func keyOf(r batch.SeqRange) rangeKey { return rangeKey{r.Shard, r.First, r.Last} }

// newBudget returns a budget with no limit until setLimit is called.
func newBudget() *budget {
	return &budget{held: make(map[rangeKey][]int64), changed: make(chan struct{})}
}

// setLimit sets the most bytes the budget holds (<= 0: no limit) and wakes
// the readers waiting for room.
func (b *budget) setLimit(max int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.max = max
	b.broadcastLocked()
}

// limit returns the most bytes the budget holds (<= 0: no limit).
func (b *budget) limit() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max
}

// reserve waits until n more bytes fit in the budget, or nothing is held
// or reserved (a page larger than the whole budget is still read, alone),
// then reserves them. It returns ctx.Err() if ctx is done first.
func (b *budget) reserve(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		inUse := b.used + b.reserved
		if b.max <= 0 || inUse == 0 || inUse+n <= b.max {
			b.reserved += n
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

// release gives back n reserved bytes.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.reserved -= n
	b.broadcastLocked()
	b.mu.Unlock()
}

// take holds n bytes for a delivered range in place of a reservation of
// reserved bytes, whether or not they fit: the page is read, and is never
// dropped.
func (b *budget) take(r batch.SeqRange, n, reserved int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := keyOf(r)
	b.held[k] = append(b.held[k], n)
	b.used += n
	b.reserved -= reserved
	b.peak = max(b.peak, b.used)
	if reserved > n {
		b.broadcastLocked()
	}
}

// giveBack releases the bytes held for each of ranges (once per range
// given), and wakes the readers waiting for room.
func (b *budget) giveBack(ranges []batch.SeqRange) {
	b.mu.Lock()
	defer b.mu.Unlock()
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
		b.broadcastLocked()
	}
}

func (b *budget) broadcastLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// usage returns the bytes held now and the most ever held.
func (b *budget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
