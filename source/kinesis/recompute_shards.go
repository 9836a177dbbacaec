package kinesis

import (
	"context"
	"errors"
	"sync"

	"github.com/weirstream/weir/batch"
)

// readRanges reads the ranges of a block back (rangeReader.read), those of
// different shards at once and those of one shard one after the other, in
// the block's order, and never while another Recompute reads the same
// shard (shardTurns): a shard's reads stay as few at a time as a reader's,
// and a restart recomputing many blocks reads every shard at once. It
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
			for _, i := range byShard[k] {
				errs[i] = r.turns.do(ctx, k, func() error {
					var err error
					recs[i], err = rc.read(ctx, ranges[i])
					return err
				})
				var unavailable *RangeUnavailableError
				if errs[i] != nil && (!r.cfg.SkipUnavailableRanges || !errors.As(errs[i], &unavailable)) {
					fail(errs[i])
					return
				}
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

// shardTurn is a shard's turn: a token channel, and how many wait for it or
// hold it (the entry goes when none does).
type shardTurn struct {
	token chan struct{}
	users int
}

// do calls f once no other do holds k's turn, or returns ctx.Err() if ctx
// is done first.
func (t *shardTurns) do(ctx context.Context, k shardKey, f func() error) error {
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
	return f()
}
