package kinesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/kpl"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/sealtime"
	"github.com/weirstream/weir/source"
)

// readShard reads shardID from pos into the block generator until the
// shard ends (the reader reports it and returns nil), ctx is done (returns
// nil), or a call fails in a way retrying cannot fix (returns the error).
// A non-nil guard is asked before each read, and before each delivery once
// the block generator has room for it (see deliver); while it says other
// than lease.Held the reader neither reads nor delivers, and reads the
// records it held back again later. keys is the shard's hash key range (see convert).
func (rn *run) readShard(ctx context.Context, shardID string, keys hashRange, pos position, guard func() lease.Hold) error {
	log := rn.logger.With("shard", shardID)
	log.Info("kinesis: shard reader starting", "from", pos.String())
	lastRead := pos.After
	// ended reports that the shard was read to its end (see drained).
	ended := func() error {
		log.Info("kinesis: shard ended", "seq", lastRead)
		if ev, ok := rn.r.progress.ended(shardID); ok {
			rn.shardEnded(ctx, ev)
		}
		return nil
	}
	// gone reports whether err says the shard is closed with nothing left
	// to read (errClosedEnd) or is no longer in the stream
	// (goneFromStream): it is then taken as read to its end.
	gone := func(err error) bool {
		return errors.Is(err, errClosedEnd) || rn.goneFromStream(ctx, log, shardID, err)
	}
	asked := rn.clock.Now()
	it, answered, err := rn.datedIterator(ctx, shardID, pos)
	if gone(err) {
		return ended()
	}
	if err != nil {
		return rn.readerExit(ctx, shardID, rn.notInStream(shardID, pos, err))
	}
	trim := headTrimAt(pos)
	if answered.IsZero() {
		answered = asked // no Date: this reader's clock must do
	}
	pos = pos.pinned(answered) // LATEST as it was resolved, for any new iterator before the first record
	holding := lease.Held      // why guard holds back the current streak of records; Held: none held back
	var avg int64              // bytes a Kinesis record of the last page took; 0: unknown
	var planned time.Time      // when the reader meant to call GetRecords next; zero: at once
	var late time.Duration     // how long after its planned start a call usually returns (moving average); 0: unknown
	capped := newLimiter(rn.clock, rn.cfg.MaxRecordsPerSecond, time.Second)
	rn.readers.Add(1)
	defer rn.readers.Add(-1)
	for {
		if guard != nil {
			// Asked before reading too: pages read now would only be
			// dropped, and take the shard's read limits (shared) from the
			// worker that may own the lease by now.
			if hold := guard(); hold != lease.Held {
				if hold != holding {
					logHeldBack(log, hold, lastRead)
					holding = hold
				}
				if err := clock.Sleep(ctx, rn.clock, rn.cfg.PollInterval); err != nil {
					return nil
				}
				planned = time.Time{}
				continue // an iterator that expired meanwhile is renewed as any
			}
		}
		limit, reserved, err := rn.beforeRead(ctx, avg, capped)
		if err != nil {
			return nil // ctx is done
		}
		out, started, err := rn.readRecords(ctx, shardID, it, limit)
		if planned.IsZero() || started.Before(planned) {
			planned = started
		}
		late = movingAverage(late, rn.clock.Now().Sub(planned))
		if out != nil {
			capped.giveBack(limit - len(out.Records))
			rn.shared.giveBack(limit - len(out.Records))
		}
		if err != nil {
			rn.r.budget.release(reserved) // nothing delivered
		}
		var expired *types.ExpiredIteratorException
		if errors.As(err, &expired) {
			rn.r.stats.shardRetry(shardID, causeExpiredIterator)
			resume := resumeAt(pos, lastRead)
			log.Debug("kinesis: iterator expired, getting a new one", "from", resume.String())
			if it, err = rn.iterator(ctx, shardID, resume, 0); err != nil {
				if gone(err) {
					return ended()
				}
				return rn.readerExit(ctx, shardID, err)
			}
			planned = time.Time{} // not a planned read: its start is no lateness
			continue
		}
		if gone(err) {
			return ended()
		}
		if err != nil {
			return rn.readerExit(ctx, shardID, err)
		}
		size, hold, err := rn.deliver(ctx, shardID, keys, out.Records, trim, reserved, guard)
		if err != nil {
			return rn.readerExit(ctx, shardID, err)
		}
		if hold != lease.Held {
			// The lease may be another worker's by now: nothing was
			// delivered; read these records again once it is renewed (or
			// stop when its loss is reported).
			if hold != holding {
				logHeldBack(log, hold, lastRead)
				holding = hold
			}
			if err := clock.Sleep(ctx, rn.clock, rn.cfg.PollInterval); err != nil {
				return nil
			}
			if it, err = rn.iterator(ctx, shardID, resumeAt(pos, lastRead), 0); err != nil {
				if gone(err) {
					return ended()
				}
				return rn.readerExit(ctx, shardID, err)
			}
			planned = time.Time{}
			continue
		}
		holding = lease.Held
		if n := len(out.Records); n > 0 {
			lastRead = aws.ToString(out.Records[n-1].SequenceNumber)
			trim = headTrim{} // only the first record read can be the one at pos.At
			avg = max(size/int64(n), 1)
		}
		if out.MillisBehindLatest != nil {
			rn.r.progress.behind(shardID, *out.MillisBehindLatest)
		}
		if out.NextShardIterator == nil {
			return ended()
		}
		it = out.NextShardIterator
		wait := rn.pause(started, out, limit, late)
		planned = rn.clock.Now().Add(wait)
		if err := clock.Sleep(ctx, rn.clock, wait); err != nil {
			return nil
		}
	}
}

// goneFromStream reports whether err, a call's error for shardID, says
// the shard is no longer in the stream while the stream is: Kinesis
// answers ResourceNotFoundException and ListShards leaves the shard out, as
// for a closed shard whose records all passed the retention period. The
// KCL takes such a shard as read to its end; so does the reader, so that
// its lease is marked SHARD_END and its children are read, rather than
// fail at every start. It logs the shard's end at WARN on log.
func (rn *run) goneFromStream(ctx context.Context, log *slog.Logger, shardID string, err error) bool {
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		return false
	}
	shards, lerr := rn.listShards(ctx)
	if lerr != nil {
		return false
	}
	for _, s := range shards {
		if s.ID == shardID {
			return false
		}
	}
	log.Warn("kinesis: the shard is no longer in the stream (its records passed the retention period); taking it as read to its end, as the KCL does", "err", err)
	return true
}

// pause returns how long a reader waits before its next GetRecords call,
// after out, whose call started at started and asked for at most limit
// records; late is how long after its planned start a call usually
// returns. When more records are waiting, it reads again as soon as
// MinReadInterval passed since started; otherwise it waits PollInterval,
// and never less than that floor, but reads up to half of that wait
// sooner (or once, to get in phase, up to a PollInterval later) to end
// just before a batch is cut (see alignedWait).
func (rn *run) pause(started time.Time, out *awskinesis.GetRecordsOutput, limit int, late time.Duration) time.Duration {
	now := rn.clock.Now()
	floor := rn.cfg.MinReadInterval - now.Sub(started)
	if moreWaiting(out, limit) {
		return floor
	}
	wait := max(rn.cfg.PollInterval, floor)
	return rn.alignedWait(now, max(floor, wait/2), wait, late)
}

// The lead of a read slot (see alignedWait) has a margin of
// minReadMargin, or of a 40th of the batch interval if longer (a read
// that misses its batch costs a batch interval), and is rounded up to
// leadStep, so that it changes seldom.
const (
	minReadMargin = 5 * time.Millisecond
	leadStep      = 10 * time.Millisecond
)

// alignedWait returns the wait from now until the latest read slot
// between now+lo and now+hi (or up to leadStep after it), or if there is
// none the first slot after that (a reader gets in phase once); or hi if the driver did not say
// its batch interval or the block interval does not divide it. A reader
// at the tip of its shard reads at a slot so that what it reads is in the
// block sealed just before a batch is cut, not left for the next batch:
// records then wait for the reader's next read and hardly for the batch.
// The slots are B - lead - k*step for each batch time B (a multiple of
// the batch interval since the Unix epoch), k >= 0 with k*step < the
// batch interval, step the wait after a read at the tip (PollInterval, at
// least MinReadInterval), and lead the block seal's lead (sealtime.Lead)
// plus twice late (how long after its planned start a call usually
// returns) plus a margin, rounded up to leadStep. Reads stay at least
// MinReadInterval apart (lo is at least the floor): a slot less than
// leadStep before lo is taken at lo.
func (rn *run) alignedWait(now time.Time, lo, hi, late time.Duration) time.Duration {
	iv, biv := rn.batchInterval, rn.blockInterval
	if iv <= 0 || biv <= 0 || iv%biv != 0 || lo > hi {
		return hi
	}
	step := max(rn.cfg.PollInterval, rn.cfg.MinReadInterval).Nanoseconds()
	margin := max(minReadMargin, iv/40)
	lead := ceilDiv((sealtime.Lead(biv)+2*late+margin).Nanoseconds(), leadStep.Nanoseconds()) * leadStep.Nanoseconds()
	ivn, at := iv.Nanoseconds(), now.UnixNano()
	// A slot up to leadStep after hi counts as within it: when the lead
	// shrinks a step, the slot a wait of hi aimed at moves that much later,
	// and the slot before it may be as little as MinReadInterval away, more
	// reads than PollInterval allows.
	latest := at + hi.Nanoseconds() + leadStep.Nanoseconds()
	b := ceilDiv(latest+lead, ivn) * ivn // the first batch time with a slot at or after latest: b - lead
	var slot int64
	if k := ceilDiv(b-lead-latest, step); k*step < ivn {
		slot = b - lead - k*step // the latest of b's slots not after latest
	} else {
		slot = b - ivn - lead // b's slots are all after latest: the batch before's last
	}
	// A slot just before lo is taken at lo: a read that started a little
	// late (a busy machine), or a lead that grew a step, puts the floor a
	// little past the next slot, and starting at the floor still ends
	// before the seal, within the lead's margin.
	if slot >= at+lo.Nanoseconds()-leadStep.Nanoseconds() {
		return max(time.Duration(slot-at), lo)
	}
	k := min((b-lead-latest)/step, ceilDiv(ivn, step)-1) // b's first slot at or after latest
	return time.Duration(b - lead - k*step - at)
}

// ceilDiv returns a/b rounded up, for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// movingAverage adds the sample d to the moving average avg (0: none yet),
// weighing it a quarter. A sample over twice the average (plus leadStep)
// counts as that much: one slow call or one stall of a busy machine would
// otherwise move the reads it times far ahead of their batches, out of
// phase, for many reads after it, while a lateness that lasts still raises
// the average by a quarter or more at each read.
func movingAverage(avg, d time.Duration) time.Duration {
	if avg == 0 {
		return d
	}
	d = min(d, 2*avg+leadStep)
	return avg + (d-avg)/4
}

// pageCutBytes is the data size from which a GetRecords page is taken to
// have been cut by the call's response size limit (10 MiB) rather than
// having reached the tip of the shard: within one largest record (1 MiB)
// of it.
const pageCutBytes = 9 << 20

// moreWaiting reports whether records are known to wait after out, a
// GetRecords answer to a call limited to limit records: the page is full
// (limit records), or so large that the response size limit cut it, or
// MillisBehindLatest says the reader is behind the tip. A page that is
// full says so whatever MillisBehindLatest says: some servers always
// answer 0, and Kinesis itself may answer 0 at the tip of a busy shard.
func moreWaiting(out *awskinesis.GetRecordsOutput, limit int) bool {
	n := len(out.Records)
	switch {
	case n == 0:
		return false
	case n >= limit, aws.ToInt64(out.MillisBehindLatest) > 0:
		return true
	}
	size := 0
	for _, r := range out.Records {
		size += len(r.Data) + len(aws.ToString(r.PartitionKey))
	}
	return size >= pageCutBytes
}

// resumeAt is where a reader that started at pos and last delivered
// lastRead ("" if nothing yet) reads again.
func resumeAt(pos position, lastRead string) position {
	if lastRead != "" {
		return position{After: lastRead}
	}
	return pos
}

// readerExit turns a reader's error into what its goroutine returns: nil
// when the reader was stopped, the error wrapped with the shard otherwise.
func (rn *run) readerExit(ctx context.Context, shardID string, err error) error {
	if ctx.Err() != nil || errors.Is(err, source.ErrStopped) {
		return nil
	}
	return fmt.Errorf("kinesis: reading shard %s of stream %s: %w", shardID, rn.cfg.Stream, err)
}

// beforeRead reserves room in the byte budget for the next page, waiting
// while it is full, and waits until the shard's cap (capped) and the
// receiver's rate (rn.shared) let it read. It returns the Limit of the
// next GetRecords call and the bytes reserved for it. The page is
// RecordsPerRead records of avg bytes (the last page's; 0: unknown, then
// a whole 10 MiB page is planned, and its records are taken to be
// assumedRecordBytes), but no more than a quarter of the budget, nor than
// the records the limiters let it read. The reservation is decodeFactor
// times the page, the memory a page takes while it is received and
// decoded, so that the budget bounds the reader's memory, not only the
// records it holds. The caller gives back the records the call did not
// use to both limiters, and the reservation to the budget (deliver does).
func (rn *run) beforeRead(ctx context.Context, avg int64, capped *limiter) (limit int, reserved int64, err error) {
	b := rn.r.budget
	perRead := rn.cfg.RecordsPerRead
	page := int64(maxPageBytes)
	if avg > 0 {
		page = min(avg*int64(perRead), maxPageBytes)
	}
	if lim := b.limit(); lim > 0 {
		page = min(page, max(lim/(4*decodeFactor), avg))
	}
	want := page * decodeFactor
	if err := b.reserve(ctx, want); err != nil {
		return 0, 0, err
	}
	limit = int(max(min(page/cmp.Or(avg, assumedRecordBytes), int64(perRead)), 1))
	// Each limiter is waited on for what a read every MinReadInterval
	// earns (the shared one: this reader's share of it), so that reads
	// are few and each takes what accumulated.
	perInterval := func(rate float64, readers int64) int {
		return int(rate * rn.cfg.MinReadInterval.Seconds() / float64(max(readers, 1)))
	}
	n, err := capped.take(ctx, limit, perInterval(capped.currentRate(), 1))
	if err != nil {
		b.release(want)
		return 0, 0, err
	}
	m, err := rn.shared.take(ctx, n, perInterval(rn.shared.currentRate(), rn.readers.Load()))
	if err != nil {
		capped.giveBack(n)
		b.release(want)
		return 0, 0, err
	}
	capped.giveBack(n - m)
	if cut := int64(m) * max(avg, 1) * decodeFactor; avg > 0 && cut < want { // the limiters cut the page
		b.release(want - cut)
		want = cut
	}
	return m, want, nil
}

// decodeFactor is how many times its records' bytes a page takes in
// memory while it is read: the JSON answer (base64 data: 4/3 of it, plus
// the other fields) and the decoded records exist at once.
const decodeFactor = 3

// maxPageBytes is the most data one GetRecords call returns (10 MiB).
const maxPageBytes = 10 << 20

// assumedRecordBytes is the record size a reader assumes, to size its
// first page to its reservation, before it has read one: with the default
// budget, a full page of RecordsPerRead records; with a small budget, a
// page that stays within it unless records are larger than this.
const assumedRecordBytes = 1 << 10

// deliver de-aggregates one GetRecords result of a shard whose hash key
// range is keys, leaves out the user records trim covers, and adds the rest
// to the block generator whole, with its range (whose Count is then less
// than its records: Recompute trims and filters them the same way). It
// returns the bytes the records hold in memory, which the byte budget
// holds, in place of the reserved bytes, until their block is completed.
//
// A non-nil guard is asked whether the records may be delivered once the
// generator has room for them, after its wait (a stalled pipeline), which
// may outlast the lease: when it says other than lease.Held, deliver adds
// nothing, gives the reservation back and returns its answer.
func (rn *run) deliver(ctx context.Context, shardID string, keys hashRange, krecs []types.Record, trim headTrim, reserved int64, guard func() lease.Hold) (int64, lease.Hold, error) {
	if len(krecs) == 0 {
		rn.r.budget.release(reserved)
		return 0, lease.Held, nil
	}
	recs, conv := convert(shardID, krecs, keys)
	if conv.outside > 0 && rn.r.stats.outOfRange(shardID, conv.outside) {
		rn.logger.Info("kinesis: leaving out user records of KPL aggregates outside the shard's hash key range, as the KCL does; the KPL puts them again on their shard (logged once per shard)",
			"shard", shardID, "seq", aws.ToString(krecs[0].SequenceNumber), "records", conv.outside)
	}
	recs = trim.apply(recs)
	if len(recs) == 0 {
		rn.r.budget.release(reserved)
		rn.r.stats.read(len(krecs), 0, conv.bad)
		rn.malformed(shardID, conv)
		return 0, lease.Held, nil // only empty or filtered-out aggregates: nothing to add, nothing to recompute
	}
	rng := batch.SeqRange{
		Stream: rn.cfg.Stream,
		Shard:  shardID,
		First:  aws.ToString(krecs[0].SequenceNumber),
		Last:   aws.ToString(krecs[len(krecs)-1].SequenceNumber),
		Count:  len(recs),
	}
	var size int64
	for i := range recs {
		size += recordBytes(&recs[i])
	}
	hold := lease.Held
	var admit func() bool
	if guard != nil {
		admit = func() bool { hold = guard(); return hold == lease.Held }
	}
	rn.r.budget.take(rng, size, reserved)
	rn.r.progress.adding(rng.Shard) // before the block can complete
	added, err := rn.gen.AddIf(ctx, admit, recs, rng)
	if err != nil || !added {
		rn.r.progress.notAdded(rng.Shard)
		rn.r.budget.giveBack([]batch.SeqRange{rng})
		return 0, hold, err
	}
	rn.r.stats.read(len(krecs), len(recs), conv.bad)
	rn.malformed(shardID, conv)
	rn.r.progress.added(rng)
	return size, lease.Held, nil
}

// malformed counts the records of shardID that conv found looking like
// KPL aggregates but not decoding as one, and warns when the shard's count
// reaches a power of two (1, 2, 4...): a producer that writes such records
// would otherwise log a line per record.
func (rn *run) malformed(shardID string, conv conversion) {
	if conv.bad == 0 {
		return
	}
	if n, warn := rn.r.stats.malformedOf(shardID, conv.bad); warn {
		rn.logger.Warn("kinesis: records look like KPL aggregates (they start with its magic number) but do not decode as one; delivering each as it is, one user record (logged each time the shard's count doubles)",
			"shard", shardID, "seq", conv.badSeq, "err", conv.badErr, "malformed", n)
	}
}

// headTrim leaves out the first user records of the KPL aggregate at a KCL
// checkpoint inside it (position.AtSubSequence): they are processed.
type headTrim struct {
	seq     string // the aggregate's sequence number; "" leaves out nothing
	through int64  // the greatest sub-sequence number left out
}

// headTrimAt returns the trim of a reader starting at pos.
func headTrimAt(pos position) headTrim {
	if pos.After != "" || pos.At == "" || pos.AtSubSequence < 0 || pos.AtSubSequence == 0 && !pos.AtCheckpoint {
		return headTrim{}
	}
	return headTrim{seq: pos.At, through: pos.AtSubSequence}
}

// apply returns recs without its leading user records of the aggregate at
// h.seq up to sub-sequence h.through.
func (h headTrim) apply(recs []Record) []Record {
	if h.seq == "" {
		return recs
	}
	n := 0
	for n < len(recs) && recs[n].SequenceNumber == h.seq && recs[n].SubSequenceNumber <= h.through {
		n++
	}
	return recs[n:]
}

// convert de-aggregates Kinesis records of a shard whose hash key range is
// keys into user records, in order. Like the KCL, it leaves out the user
// records of KPL aggregates whose hash key is outside keys (see
// hashRange.keep): after a reshard, an aggregate the KPL built for the
// parent can land on a child, and the KPL puts again on their own shard
// the user records the child does not hold. Records that are not
// aggregates are never filtered. It returns how many records looked like
// aggregates but were not (each is delivered as it is; the caller logs
// them, see run.malformed), and how many user records it left out.
//
// The records are counted before the result is allocated, at its exact
// size: the counts in a page come from its producer, so no guess sizes any
// allocation, and what the result holds is what the byte budget counts.
func convert(shardID string, krecs []types.Record, keys hashRange) ([]Record, conversion) {
	n := len(krecs)
	var conv conversion
	var split []userRecords // by index in krecs; nil while no record looks like an aggregate
	for i := range krecs {
		kr := &krecs[i]
		if !kpl.MaybeAggregate(kr.Data) { // most records: no de-aggregation, no allocation
			continue
		}
		urs, aggregated, err := kpl.Deaggregate(kr.Data, aws.ToString(kr.PartitionKey))
		if err != nil {
			if conv.bad == 0 {
				conv.badSeq, conv.badErr = aws.ToString(kr.SequenceNumber), err
			}
			conv.bad++
		}
		if aggregated {
			var outside int
			urs, outside = keepInRange(keys, urs)
			conv.outside += outside
		}
		if split == nil {
			split = make([]userRecords, len(krecs))
		}
		split[i] = userRecords{urs, aggregated}
		n += len(urs) - 1
	}
	out := make([]Record, 0, n)
	for i, kr := range krecs {
		seq := aws.ToString(kr.SequenceNumber)
		arrival := aws.ToTime(kr.ApproximateArrivalTimestamp)
		if !kpl.MaybeAggregate(kr.Data) {
			out = append(out, Record{Data: kr.Data, PartitionKey: aws.ToString(kr.PartitionKey), SequenceNumber: seq, ApproximateArrivalTimestamp: arrival, ShardID: shardID})
			continue
		}
		for _, ur := range split[i].recs {
			out = append(out, Record{
				Data:                        ur.Data,
				PartitionKey:                ur.PartitionKey,
				ExplicitHashKey:             ur.ExplicitHashKey,
				SequenceNumber:              seq,
				SubSequenceNumber:           ur.SubSequence,
				Aggregated:                  split[i].aggregated,
				ApproximateArrivalTimestamp: arrival,
				ShardID:                     shardID,
			})
		}
	}
	return out, conv
}

// conversion counts what convert did not deliver as user records.
type conversion struct {
	bad     int // records that looked like KPL aggregates but were not, delivered as they are
	outside int // user records left out: outside the shard's hash key range
	// badSeq and badErr are the sequence number of the first of the bad
	// records, and why it is not an aggregate.
	badSeq string
	badErr error
}

// userRecords is what kpl.Deaggregate made of one Kinesis record.
type userRecords struct {
	recs       []kpl.UserRecord
	aggregated bool
}

// iterator gets a shard iterator at pos, retrying retryable errors
// (maxAttempts 0: until ctx is done).
func (rn *run) iterator(ctx context.Context, shardID string, pos position, maxAttempts int) (*string, error) {
	return iteratorWith(ctx, rn.client, rn.retry, streamRef(rn.cfg.Stream), shardID, pos, maxAttempts)
}

// datedIterator is iterator, retried until ctx is done, that also returns
// the Date of Kinesis's answer: a time on Kinesis's clock (whole seconds,
// rounded down) just after it resolved pos, whatever this reader's clock
// says; the zero time if the client's answer has no response metadata (a
// fake).
func (rn *run) datedIterator(ctx context.Context, shardID string, pos position) (*string, time.Time, error) {
	out, err := getIterator(ctx, rn.client, rn.retry, streamRef(rn.cfg.Stream), shardID, pos, 0)
	if err != nil {
		return nil, time.Time{}, err
	}
	date, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
	return out.ShardIterator, date, nil
}

// iteratorWith is iterator for any client and stream (Recompute uses the
// range's stream).
func iteratorWith(ctx context.Context, client Client, r *retrier, stream streamRef, shardID string, pos position, maxAttempts int) (*string, error) {
	out, err := getIterator(ctx, client, r, stream, shardID, pos, maxAttempts)
	if err != nil {
		return nil, err
	}
	return out.ShardIterator, nil
}

// errClosedEnd is getIterator's error when Kinesis answers no iterator: it
// does for a closed shard with no record at or after the position, so the
// KCL, and the reader, take the shard as read to its end.
var errClosedEnd = errors.New("kinesis answered no shard iterator: the shard is closed and has no record from this position on")

// getIterator is iteratorWith that returns Kinesis's answer; its
// ShardIterator is never nil (errClosedEnd).
func getIterator(ctx context.Context, client Client, r *retrier, stream streamRef, shardID string, pos position, maxAttempts int) (*awskinesis.GetShardIteratorOutput, error) {
	in := pos.iteratorInput(stream, shardID)
	out, err := do(ctx, r, maxAttempts, "GetShardIterator", shardID, func(ctx context.Context) (*awskinesis.GetShardIteratorOutput, error) {
		return client.GetShardIterator(ctx, in)
	})
	if err != nil {
		return nil, fmt.Errorf("getting a shard iterator at %s: %w", pos, err)
	}
	if out.ShardIterator == nil {
		return nil, fmt.Errorf("getting a shard iterator at %s: %w", pos, errClosedEnd)
	}
	return out, nil
}

// readRecords calls GetRecords for a shard reader (at most limit records,
// retried until ctx is done), and returns when its last attempt started.
func (rn *run) readRecords(ctx context.Context, shardID string, it *string, limit int) (*awskinesis.GetRecordsOutput, time.Time, error) {
	in := &awskinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(int32(limit)), StreamARN: streamRef(rn.cfg.Stream).arn()}
	var started time.Time
	out, err := do(ctx, rn.retry, 0, "GetRecords", shardID, func(ctx context.Context) (*awskinesis.GetRecordsOutput, error) {
		started = rn.clock.Now()
		return rn.client.GetRecords(ctx, in)
	})
	if err == nil {
		var bytes int64
		for _, rec := range out.Records {
			bytes += int64(len(rec.Data))
		}
		rn.r.stats.getRecords(shardID, rn.clock.Now().Sub(started), bytes)
	}
	return out, started, err
}

// getRecordsWith is getRecords for any client and stream.
func getRecordsWith(ctx context.Context, client Client, r *retrier, stream streamRef, shardID string, it *string, limit, maxAttempts int) (*awskinesis.GetRecordsOutput, error) {
	in := &awskinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(int32(limit)), StreamARN: stream.arn()}
	return do(ctx, r, maxAttempts, "GetRecords", shardID, func(ctx context.Context) (*awskinesis.GetRecordsOutput, error) {
		return client.GetRecords(ctx, in)
	})
}

// listShards lists every shard of the stream, page by page, retrying
// until ctx is done, and caches their hash key ranges.
func (rn *run) listShards(ctx context.Context) ([]shardInfo, error) {
	shards, err := listShardsWith(ctx, rn.client, rn.retry, streamRef(rn.cfg.Stream), 0)
	if err == nil {
		rn.r.ranges.note(rn.cfg.Stream, shards)
	}
	return shards, err
}

// hashRange returns the hash key range of a shard of the stream.
func (rn *run) hashRange(ctx context.Context, shardID string) (hashRange, error) {
	return rn.r.hashRangeOf(ctx, rn.client, rn.retry, rn.cfg.Stream, shardID, 0, rn.logger)
}

// listShardsWith lists every shard of stream, page by page, each call
// retried at most maxAttempts times (0: until ctx is done). An expired
// NextToken starts the listing again.
func listShardsWith(ctx context.Context, client Client, retry *retrier, stream streamRef, maxAttempts int) ([]shardInfo, error) {
	for {
		shards, err := listShardsOnce(ctx, client, retry, stream, maxAttempts)
		var expired *types.ExpiredNextTokenException
		if errors.As(err, &expired) {
			continue
		}
		return shards, err
	}
}

func listShardsOnce(ctx context.Context, client Client, retry *retrier, stream streamRef, maxAttempts int) ([]shardInfo, error) {
	var shards []shardInfo
	var token *string
	for {
		in := &awskinesis.ListShardsInput{NextToken: token}
		if token == nil {
			in.StreamName, in.StreamARN = stream.name(), stream.arn()
		}
		out, err := do(ctx, retry, maxAttempts, "ListShards", "", func(ctx context.Context) (*awskinesis.ListShardsOutput, error) {
			return client.ListShards(ctx, in)
		})
		if err != nil {
			return nil, fmt.Errorf("kinesis: listing the shards of stream %s: %w", string(stream), err)
		}
		for _, s := range out.Shards {
			sh := shardInfo{
				ID:             aws.ToString(s.ShardId),
				Parent:         aws.ToString(s.ParentShardId),
				AdjacentParent: aws.ToString(s.AdjacentParentShardId),
			}
			if r := s.HashKeyRange; r != nil {
				sh.StartingHashKey = aws.ToString(r.StartingHashKey)
				sh.EndingHashKey = aws.ToString(r.EndingHashKey)
			}
			if r := s.SequenceNumberRange; r != nil {
				sh.StartingSeq = aws.ToString(r.StartingSequenceNumber)
				sh.EndingSeq = aws.ToString(r.EndingSequenceNumber)
			}
			shards = append(shards, sh)
		}
		if out.NextToken == nil || *out.NextToken == "" {
			return shards, nil
		}
		token = out.NextToken
	}
}
