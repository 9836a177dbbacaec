package kinesis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
)

// readRanges reads the ranges of a block back (rangeReader.read), those of
// different shards at once and those of one shard one after the other, in
// the block's order, in one turn of the shard, never while another
// Recompute reads it (shardTurns): a shard's reads stay as few at a time
// as a reader's, and a restart recomputing many blocks reads every shard
// at once. A range that starts after the one read before it in the
// shard's turns (the same block's, or another Recompute's that held the
// turn while this one waited for it) goes on from that range's last
// iterator (shardCursor) instead of getting one of its own. It
// returns each range's records and error, by range index. A failure
// (other than a range unavailable with SkipUnavailableRanges) stops the reads not
// yet done, which then fail with the ctx's error: failed is the first.
func (r *Receiver) readRanges(ctx context.Context, rc *rangeReader, ranges []batch.SeqRange) (recs [][]Record, errs []error, failed error) {
	recs, errs = make([][]Record, len(ranges)), make([]error, len(ranges))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	byShard := make(map[shardKey][]int)
	var order []shardKey
	for i, rng := range ranges {
		k := shardKey{rng.Stream, rng.Shard}
		if _, ok := byShard[k]; !ok {
			order = append(order, k)
		}
		byShard[k] = append(byShard[k], i)
	}
	var once sync.Once
	fail := func(err error) {
		once.Do(func() { failed = err })
		cancel(err)
	}
	var wg sync.WaitGroup
	for _, k := range order {
		wg.Go(func() {
			err := r.turns.do(ctx, k, func(cur *shardCursor) error {
				for _, i := range byShard[k] {
					recs[i], errs[i] = rc.read(ctx, ranges[i], cur)
					var unavailable *RangeUnavailableError
					if errs[i] != nil && (!r.cfg.SkipUnavailableRanges || !errors.As(errs[i], &unavailable)) {
						return errs[i]
					}
				}
				return nil
			})
			if err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	return recs, errs, failed
}

// shardKey names a shard of a stream.
type shardKey struct{ stream, shard string }

// shardTurns lets one Recompute at a time read a shard. The zero value is
// ready to use; it is safe for concurrent use.
type shardTurns struct {
	mu    sync.Mutex
	turns map[shardKey]*shardTurn
}

// shardTurn is a shard's turn: a token channel, how many wait for it or
// hold it (the entry, and with it the cursor, goes when none does), and
// where the last read of the shard stopped, which only the holder of the
// token uses.
type shardTurn struct {
	token  chan struct{}
	users  int
	cursor shardCursor
}

// do calls f with k's cursor once no other do holds k's turn, or returns
// ctx.Err() if ctx is done first.
func (t *shardTurns) do(ctx context.Context, k shardKey, f func(*shardCursor) error) error {
	t.mu.Lock()
	if t.turns == nil {
		t.turns = make(map[shardKey]*shardTurn)
	}
	turn := t.turns[k]
	if turn == nil {
		turn = &shardTurn{token: make(chan struct{}, 1)}
		t.turns[k] = turn
	}
	turn.users++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if turn.users--; turn.users == 0 {
			delete(t.turns, k)
		}
		t.mu.Unlock()
	}()
	select {
	case turn.token <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-turn.token }()
	return f(&turn.cursor)
}

// cursorMaxAge is how long a shardCursor's iterator is used after the page
// that gave it; Kinesis's iterators expire after 5 minutes.
const cursorMaxAge = time.Minute

// shardCursor is where the last range read back in a shard's turns
// stopped: the NextShardIterator of its last page. When a restart
// recomputes the blocks of a shard one after the other, each range starts
// where the one before ended, so its read can go on with that iterator
// rather than call GetShardIterator (whose rate Kinesis limits to 5 a
// second per shard) for every range. The zero value holds no iterator.
type shardCursor struct {
	next  *string   // the iterator after the page's last record; nil: none
	after string    // the sequence number of the page's last record
	at    time.Time // when the page was read
}

// take returns the cursor's iterator for a read of rng, or nil if rng
// does not start after it or the iterator is too old; the cursor is empty
// afterwards. The iterator is only a guess: the first record it returns
// must be rng's first, otherwise the read gets an iterator of its own.
func (c *shardCursor) take(rng batch.SeqRange, now time.Time) *string {
	if c == nil || c.next == nil {
		return nil
	}
	it := c.next
	c.next = nil
	if now.Sub(c.at) > cursorMaxAge || batch.CompareSeq(rng.First, c.after) <= 0 {
		return nil
	}
	return it
}

// keep remembers where a page left the shard, if it has an iterator after
// its last record.
func (c *shardCursor) keep(page []types.Record, next *string, now time.Time) {
	if c == nil || len(page) == 0 || next == nil {
		return
	}
	c.next, c.after, c.at = next, aws.ToString(page[len(page)-1].SequenceNumber), now
}
