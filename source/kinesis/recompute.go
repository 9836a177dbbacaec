package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/source"
)

// Recompute rebuilds the records of a stored block from its ranges, for a
// block the store lost: for each range it reads the shard from the range's
// First to its Last inclusive, de-aggregating as the reader did, so the
// records come back the same and in the same order. The ranges of
// different shards are read at once, those of one shard in order, one at
// a time, also across concurrent calls. A range
// holding fewer records than it spans (a reader started inside the KPL
// aggregate at First, at a KCL checkpoint) leaves out that aggregate's
// first user records, as the reader did.
//
// A range is read with one GetShardIterator AT_SEQUENCE_NUMBER First, then
// GetRecords calls that follow each answer's NextShardIterator, page by
// page, until Last is read. An iterator that expires before then is
// replaced by a GetShardIterator AFTER_SEQUENCE_NUMBER the last record read
// back (AT_SEQUENCE_NUMBER First again if none was), at most
// Config.MaxAttempts times per range: nothing is read twice or skipped. A
// range of a shard read right after another one (in the same block, or
// while this call waited for another's read of the shard, as when a
// restart recomputes a shard's blocks one after the other) starts instead
// with the NextShardIterator that read ended with, if it starts after
// that read's last record; if the first record that iterator gives is not
// the range's First, the page is dropped and the range read as above.
// Throttling, server and connection errors are retried with back-off, each
// call at most Config.MaxAttempts times, the whole call within
// Config.RecomputeTimeout.
//
// A range Kinesis can no longer serve (trimmed, or its shard gone) gives a
// *RangeUnavailableError: returned by default; with
// Config.SkipUnavailableRanges its records are left out, the range counted
// (Stats.RangesSkipped), and the next range read: Recompute then returns the
// records of the other ranges with a *source.RangesSkippedError naming the
// ranges left out and wrapping their errors. The driver runs the block
// without them, and reports the error to its listeners and its log. Recompute is safe for concurrent use
// and works whether or not the receiver runs.
func (r *Receiver) Recompute(ctx context.Context, info batch.BlockInfo) ([]Record, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RecomputeTimeout)
	defer cancel()
	client, err := r.clientFor(ctx)
	if err != nil {
		return nil, err
	}
	rc := r.rangeReader(client)
	defer rc.retry.stopAllThrottling() // its calls are its own: no later one ends an episode
	out := make([]Record, 0, info.Count)
	read, skipped := 0, 0
	defer func() { r.stats.recomputed(read, skipped) }()
	// The per-shard counters its reads leave (retries) are forgotten with
	// their shards' progress, which a shard no reader reads here (the
	// blocks a restart recovers, of a shard another worker now reads) may
	// not have yet: tracked, such a shard is forgotten like the others.
	defer r.progress.track(info.Ranges)
	recs, errs, failed := r.readRanges(ctx, rc, info.Ranges)
	if failed != nil {
		return nil, fmt.Errorf("kinesis: recomputing block %v: %w", info.ID, failed)
	}
	var left []int
	var why []error
	for i, err := range errs {
		if err != nil { // unavailable, with SkipUnavailableRanges
			skipped++
			left, why = append(left, i), append(why, err)
			continue
		}
		read++
		out = append(out, recs[i]...)
	}
	if left != nil {
		err := fmt.Errorf("kinesis: recomputing block %v: left out %d of its %d ranges (SkipUnavailableRanges is set): %w", info.ID, len(left), len(info.Ranges), errors.Join(why...))
		return out, &source.RangesSkippedError{Ranges: left, Err: err}
	}
	return out, nil
}

// rangeReader reads sequence ranges back for Recompute.
type rangeReader struct {
	client Client
	retry  *retrier
	clock  clock.Clock
	cfg    Config
	logger *slog.Logger
	// hashRangeOf is Receiver.hashRangeOf: the ranges the readers used.
	hashRangeOf func(ctx context.Context, client Client, retry *retrier, stream, shard string, maxAttempts int, log *slog.Logger) (hashRange, error)
}

// rangeReader builds a rangeReader on the running Start's clock and logger
// when there is one, on the configured or default ones otherwise.
func (r *Receiver) rangeReader(client Client) *rangeReader {
	clk, logger := r.cfg.Clock, r.cfg.Logger
	if rt := r.runtime(); rt != nil {
		if clk == nil {
			clk = rt.Clock
		}
		if logger == nil {
			logger = rt.Logger
		}
	}
	clk = clock.Or(clk)
	if logger == nil {
		logger = slog.Default()
	}
	return &rangeReader{
		client:      client,
		retry:       r.newRetrier(client, clk, logger),
		clock:       clk,
		cfg:         r.cfg,
		logger:      logger,
		hashRangeOf: r.hashRangeOf,
	}
}

// read reads one range back, going on from cur's iterator if rng starts
// after it (cur may be nil), and leaves in cur where it stopped.
func (rc *rangeReader) read(ctx context.Context, rng batch.SeqRange, cur *shardCursor) ([]Record, error) {
	if err := checkRange(rng); err != nil {
		return nil, err
	}
	unavailable := func(err error) error {
		return &RangeUnavailableError{Range: rng, Err: err}
	}
	stream := streamRef(rng.Stream)
	// The reader filtered the shard's KPL aggregates by its hash key range:
	// so must this, to give back the same records.
	keys, err := rc.hashRangeOf(ctx, rc.client, rc.retry, rng.Stream, rng.Shard, rc.cfg.MaxAttempts, rc.logger)
	if err != nil {
		return nil, rc.classify(err, unavailable)
	}
	it := cur.take(rng, rc.clock.Now())
	guessed := it != nil
	if !guessed {
		if it, err = rc.iterator(ctx, stream, rng, ""); err != nil {
			return nil, rc.classify(err, unavailable)
		}
	}
	out := make([]Record, 0, rng.Count)
	lastRead := ""
	for expirations := 0; ; {
		limit := min(max(toRead(rng, out), 1), maxRecordsPerRead)
		res, err := getRecordsWith(ctx, rc.client, rc.retry, stream, rng.Shard, it, limit, rc.cfg.MaxAttempts)
		if guessed {
			// The cursor's iterator must start exactly at First, as an
			// iterator AT_SEQUENCE_NUMBER First does; if a page it gives
			// does not (a gap between the ranges, an empty page), the page
			// is dropped and the range read as if there were no cursor.
			// An error (an expired iterator included) is handled below, as
			// for any iterator: it was retried already.
			guessed = false
			if err == nil && (len(res.Records) == 0 || batch.CompareSeq(aws.ToString(res.Records[0].SequenceNumber), rng.First) != 0) {
				rc.logger.Debug("kinesis: recompute: the range does not start where the shard's last one ended", "shard", rng.Shard, "seq", rng.First)
				if it, err = rc.iterator(ctx, stream, rng, ""); err != nil {
					return nil, rc.classify(err, unavailable)
				}
				continue
			}
		}
		var expired *types.ExpiredIteratorException
		if errors.As(err, &expired) && expirations < rc.cfg.MaxAttempts {
			expirations++
			rc.retry.stats.shardRetry(rng.Shard, causeExpiredIterator)
			if it, err = rc.iterator(ctx, stream, rng, lastRead); err != nil {
				return nil, rc.classify(err, unavailable)
			}
			continue
		}
		if err != nil {
			return nil, rc.classify(err, unavailable)
		}
		page, done, err := takeRange(rng, res.Records, lastRead)
		if err != nil {
			return nil, unavailable(err)
		}
		recs, _ := convert(rng.Shard, page, keys) // its reader logged what it found wrong
		out = append(out, recs...)
		if n := len(page); n > 0 {
			lastRead = aws.ToString(page[n-1].SequenceNumber)
		}
		switch {
		case done:
			fit, err := fitCount(rng, out)
			if err != nil {
				return nil, unavailable(err)
			}
			cur.keep(res.Records, res.NextShardIterator, rc.clock.Now())
			return fit, nil
		case res.NextShardIterator == nil:
			return nil, unavailable(fmt.Errorf("the shard ended at %q, before the range's last record", lastRead))
		}
		it = res.NextShardIterator
		if len(res.Records) == 0 {
			if err := clock.Sleep(ctx, rc.clock, rc.cfg.PollInterval); err != nil {
				return nil, err
			}
		}
	}
}

// toRead returns how many user records of rng are left to read after out:
// a page of at most that many Kinesis records ends within the range, so
// that the next range goes on with its iterator (shardCursor). Once out
// holds rng.Count records or more before the range's end, the first
// aggregate's head (records fitCount leaves out) is among them, and the
// count is a bound: the records at First are not counted, so that the
// reads after them are not of one record each.
func toRead(rng batch.SeqRange, out []Record) int {
	if n := rng.Count - len(out); n > 0 {
		return n
	}
	head := 0
	for head < len(out) && out[head].SequenceNumber == rng.First {
		head++
	}
	return rng.Count - (len(out) - head)
}

// fitCount returns the records read back for rng, which must be rng.Count.
// More are right only when the block left out the first user records at
// rng.First, of a KPL aggregate or a plain record (its reader started at a
// KCL checkpoint, see position.AtCheckpoint): they are left out again.
func fitCount(rng batch.SeqRange, out []Record) ([]Record, error) {
	extra := len(out) - rng.Count
	if extra > 0 {
		for _, r := range out[:extra] {
			if r.SequenceNumber != rng.First {
				extra = -1 // not the head of the first aggregate
				break
			}
		}
	}
	switch {
	case extra == 0:
		return out, nil
	case extra > 0:
		return out[extra:], nil
	}
	return nil, fmt.Errorf("read %d records back, the range holds %d", len(out), rng.Count)
}

// iterator gets an iterator at the range's First (when after is empty) or
// after a sequence number already read back.
func (rc *rangeReader) iterator(ctx context.Context, stream streamRef, rng batch.SeqRange, after string) (*string, error) {
	pos := resumeAt(position{At: rng.First}, after)
	return iteratorWith(ctx, rc.client, rc.retry, stream, rng.Shard, pos, rc.cfg.MaxAttempts)
}

// classify turns the errors that mean "this range is gone" into a
// *RangeUnavailableError and returns the others as they are.
func (rc *rangeReader) classify(err error, unavailable func(error) error) error {
	var (
		notFound *types.ResourceNotFoundException
		invalid  *types.InvalidArgumentException
	)
	if errors.As(err, &notFound) || errors.As(err, &invalid) || errors.Is(err, errClosedEnd) {
		return unavailable(err)
	}
	return err
}

// takeRange returns the records of page that belong to rng, given the last
// sequence number already taken ("" for none), and whether the range is
// complete. The first record of the range must be exactly rng.First: a
// later one means the range's start was trimmed.
func takeRange(rng batch.SeqRange, page []types.Record, lastRead string) ([]types.Record, bool, error) {
	for i, kr := range page {
		seq := aws.ToString(kr.SequenceNumber)
		if lastRead == "" && i == 0 && batch.CompareSeq(seq, rng.First) != 0 {
			return nil, false, fmt.Errorf("the first record still in the shard is %s, not the range's first %s: the range was trimmed", seq, rng.First)
		}
		switch c := batch.CompareSeq(seq, rng.Last); {
		case c > 0:
			return page[:i], true, nil
		case c == 0:
			return page[:i+1], true, nil
		}
	}
	return page, false, nil
}

// checkRange reports whether rng can be read back: stream and shard named,
// Count >= 1, First and Last sequence numbers (batch.ValidateSeq: up to
// batch.MaxSeqDigits digits, the API's pattern, far more than the 56 of
// real ones) with First <= Last. Unlike batch.SeqRange.Validate, it reports
// every problem at once.
func checkRange(rng batch.SeqRange) error {
	var problems []error
	if rng.Stream == "" || rng.Shard == "" {
		problems = append(problems, errors.New("stream or shard is empty"))
	}
	if rng.Count < 1 {
		problems = append(problems, fmt.Errorf("count %d: must be >= 1", rng.Count))
	}
	for _, end := range []struct{ name, seq string }{{"first", rng.First}, {"last", rng.Last}} {
		if err := batch.ValidateSeq(end.seq); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", end.name, err))
		}
	}
	if len(problems) == 0 && batch.CompareSeq(rng.First, rng.Last) > 0 {
		problems = append(problems, errors.New("first is after last"))
	}
	if len(problems) > 0 {
		return fmt.Errorf("kinesis: range %v cannot be recomputed: %w", rng, errors.Join(problems...))
	}
	return nil
}

// isSeq reports whether s is a Kinesis sequence number (batch.ValidateSeq).
func isSeq(s string) bool { return batch.ValidateSeq(s) == nil }
