package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/lease"
)

// causeResourceInUse is a ResourceInUseException from SubscribeToShard:
// Kinesis refuses a subscription of the same consumer and shard within 5
// seconds of the previous one (this reader's, or another's it would take
// over). The reader subscribes again after a back-off.
const causeResourceInUse retryCause = "resource_in_use"

// causeIdleSubscription is a subscription that delivered no event within
// the idle timeout (FanOutConfig.idleTimeout): the reader subscribes again.
const causeIdleSubscription retryCause = "idle_subscription"

// errIdleSubscription ends a subscription that delivered no event within
// the idle timeout.
var errIdleSubscription = errors.New("kinesis: no SubscribeToShard event within the idle timeout")

// causeEmptySubscription is a subscription that ended cleanly before its
// first event: Kinesis sends one within seconds, so the event stream was
// cut (the SDK reads a stream cut short as its clean end). The reader
// subscribes again.
const causeEmptySubscription retryCause = "empty_subscription"

// errEmptySubscription ends a subscription that ended before its first
// event.
var errEmptySubscription = errors.New("kinesis: the SubscribeToShard event stream ended before its first event")

// subEnd says how one subscription ended.
type subEnd int

const (
	// subRenew: the subscription ended (its lifetime, the connection, an
	// error); subscribe again from where it stopped.
	subRenew subEnd = iota
	// subEnded: the shard was read to its end.
	subEnded
	// subHeld: records came while the lease guard said no; subscribe
	// again, from the last delivered position, after PollInterval.
	subHeld
	// subFailed: delivering records failed; the reader stops.
	subFailed
)

// shardSub is the state of one shard's fan-out reader across its
// subscriptions.
type shardSub struct {
	rn    *run
	fo    *fanOut
	shard string
	keys  hashRange // the shard's hash key range
	pos   position
	guard func() lease.Hold
	held  lease.Hold // what guard said when handle returned subHeld
	log   *slog.Logger

	trim      headTrim
	lastRead  string    // sequence number of the last record delivered
	cont      string    // continuation sequence number of the last event delivered
	lastProbe time.Time // of the safety-net end-of-shard check
	firstAt   time.Time // when the first subscription was answered, on Kinesis's clock, or asked for, on the reader's (see position.pinned); zero before
	delivered bool      // whether the current subscription delivered an event
}

// subscribeShard is readShard for enhanced fan-out: it reads shardID from
// pos through subscriptions of the run's consumer, one after another, until
// the shard ends (reported, returns nil), ctx is done (returns nil), or an
// error retrying cannot fix (returns it). A non-nil guard is asked before
// each subscription and each delivery, as by readShard.
func (rn *run) subscribeShard(ctx context.Context, shardID string, keys hashRange, pos position, guard func() lease.Hold) error {
	s := &shardSub{
		rn: rn, fo: rn.fanOut, shard: shardID, keys: keys, pos: pos, guard: guard,
		log:  rn.logger.With("shard", shardID),
		trim: headTrimAt(pos),
	}
	s.log.Info("kinesis: shard subscriber starting", "from", pos.String())
	retry := backoff.Policy{Base: rn.cfg.RetryBaseDelay, Max: rn.cfg.RetryMaxDelay}.Start()
	// Subscriptions refused or broken in a row are warned about as the
	// polling reader's calls are: the shard is not read meanwhile.
	st := rn.retry.newStreak("SubscribeToShard", shardID, 0)
	failed := 0
	var lastCall time.Time
	holding := lease.Held // why guard holds back the current streak of records; Held: none held back
	for {
		if guard != nil {
			// Asked before subscribing too, as the polling reader asks
			// before reading: events held back would only be dropped.
			if hold := guard(); hold != lease.Held {
				if hold != holding {
					logHeldBack(s.log, hold, s.lastRead)
					holding = hold
				}
				if err := clock.Sleep(ctx, rn.clock, rn.cfg.PollInterval); err != nil {
					return nil
				}
				continue
			}
		}
		// At most one SubscribeToShard call per second per consumer and
		// shard, Kinesis's limit.
		if !lastCall.IsZero() {
			if err := clock.Sleep(ctx, rn.clock, s.fo.cfg.minSubscribeInterval-rn.clock.Now().Sub(lastCall)); err != nil {
				return nil
			}
		}
		lastCall = rn.clock.Now()
		end, err := s.subscription(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if s.delivered {
			retry.Reset()
		}
		if failed > 0 && (s.delivered || err == nil) {
			st.Ended(failed + 1)
			st, failed = rn.retry.newStreak("SubscribeToShard", shardID, 0), 0
		}
		switch end {
		case subEnded:
			s.log.Info("kinesis: shard ended", "seq", s.lastRead)
			if ev, ok := rn.r.progress.ended(shardID); ok {
				rn.shardEnded(ctx, ev)
			}
			return nil
		case subFailed:
			return rn.readerExit(ctx, shardID, err)
		case subHeld:
			if s.held != holding {
				logHeldBack(s.log, s.held, s.lastRead)
				holding = s.held
			}
			if err := clock.Sleep(ctx, rn.clock, rn.cfg.PollInterval); err != nil {
				return nil
			}
			continue
		}
		holding = lease.Held
		if err == nil {
			continue // the subscription ran its course: renew it
		}
		cause := subscribeRetryCause(err)
		if cause == "" && rn.goneFromStream(ctx, s.log, shardID, err) {
			if ev, ok := rn.r.progress.ended(shardID); ok {
				rn.shardEnded(ctx, ev)
			}
			return nil
		}
		if cause == "" {
			if gone := s.refusedFor(ctx, err, true); gone != nil {
				return rn.readerExit(ctx, shardID, gone)
			}
			if s.lastRead == "" { // nothing read yet: refused at pos
				err = rn.notInStream(shardID, pos, err)
			}
			return rn.readerExit(ctx, shardID, err)
		}
		rn.r.stats.shardRetry(shardID, cause)
		if isThrottle(cause) {
			rn.retry.throttled("SubscribeToShard", shardID, cause, err)
		}
		delay := retry.Next()
		failed++
		st.Failed(failed, string(cause), cause == causeTransport, err)
		s.log.Debug("kinesis: subscribing again", "cause", string(cause), "attempt", retry.Attempts(), "delay", delay, "err", err)
		if err := clock.Sleep(ctx, rn.clock, delay); err != nil {
			return nil
		}
	}
}

// subscribeRetryCause is classify for a subscription's errors, with
// ResourceInUseException retried too.
func subscribeRetryCause(err error) retryCause {
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return causeResourceInUse
	}
	if errors.Is(err, errIdleSubscription) {
		return causeIdleSubscription
	}
	if errors.Is(err, errEmptySubscription) {
		return causeEmptySubscription
	}
	return classify(err)
}

// subscription runs one subscription until it ends, and says how. The
// error is why it ended (nil when Kinesis or the lifetime ended it), or,
// with subFailed, the delivery's.
func (s *shardSub) subscription(ctx context.Context) (subEnd, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.delivered = false
	start := s.startingPosition()
	asked := s.rn.clock.Now()
	events, answered, err := s.fo.subscribe(ctx, &awskinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(s.fo.consumerARN), ShardId: aws.String(s.shard), StartingPosition: start,
	})
	if s.firstAt.IsZero() {
		// On Kinesis's clock when its answer says (see position.pinned).
		s.firstAt = asked
		if !answered.IsZero() {
			s.firstAt = answered
		}
	}
	if err != nil {
		return subRenew, err
	}
	defer events.Close()
	s.log.Debug("kinesis: subscribed", "type", string(start.Type), "seq", aws.ToString(start.SequenceNumber))
	lifetime := s.rn.clock.NewTimer(s.fo.cfg.lifetime)
	defer lifetime.Stop()
	idle := s.rn.clock.NewTimer(s.fo.cfg.idleTimeout)
	defer idle.Stop()
	heard := false // an event came
	for {
		select {
		case <-ctx.Done():
			return subRenew, ctx.Err()
		case <-lifetime.C():
			s.log.Debug("kinesis: subscription outlived its lifetime; renewing it")
			return subRenew, nil
		case <-idle.C():
			// Not a subscription that ran its course: one silent after
			// another read nothing, so they count as failed attempts
			// (warned about in a streak, as refusals are).
			return subRenew, errIdleSubscription
		case ev, ok := <-events.Events():
			if !ok {
				if err := events.Err(); err != nil || heard {
					return subRenew, err
				}
				// Not a subscription that ran its course either: one cut
				// short after another would read nothing, silently.
				return subRenew, errEmptySubscription
			}
			heard = true
			idle.Reset(s.fo.cfg.idleTimeout)
			e, isEvent := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
			if !isEvent {
				s.log.Debug("kinesis: ignoring an unknown event", "type", typeName(ev))
				continue
			}
			if end, err := s.handle(ctx, &e.Value); end != subRenew || err != nil {
				return end, err
			}
			// handle may have waited long for the byte budget (a slow
			// pipeline): the connection was not silent meanwhile, the
			// reader was, so the idle timeout counts from now.
			idle.Reset(s.fo.cfg.idleTimeout)
		}
	}
}

// handle delivers one event's records. It returns subRenew to go on
// reading the subscription.
func (s *shardSub) handle(ctx context.Context, e *types.SubscribeToShardEvent) (subEnd, error) {
	// The event is already here: wait for the byte budget to hold it, which
	// holds back the subscription's next events (source.Runtime.MaxBufferedBytes).
	var size int64
	for i := range e.Records {
		r := &e.Records[i]
		size += recordOverhead + int64(len(r.Data)+len(aws.ToString(r.PartitionKey))+len(aws.ToString(r.SequenceNumber)))
	}
	if err := s.rn.r.budget.reserve(ctx, size); err != nil {
		return subFailed, err
	}
	// The lease is asked after the waits, for the budget and for room in
	// the block generator (deliver), which may be long (a slow pipeline):
	// it may have gone unrenewed or be handed off meanwhile.
	_, hold, err := s.rn.deliver(ctx, s.shard, s.keys, e.Records, s.trim, size, s.guard)
	if err != nil {
		return subFailed, err
	}
	if hold != lease.Held {
		s.held = hold
		return subHeld, nil
	}
	s.delivered = true
	s.rn.retry.served(s.shard) // ends a throttling episode a minute old, while subscribed
	if n := len(e.Records); n > 0 {
		s.lastRead = aws.ToString(e.Records[n-1].SequenceNumber)
		s.trim = headTrim{} // only the first record read can be the one at pos.At
	}
	if e.MillisBehindLatest != nil {
		s.rn.r.progress.behind(s.shard, *e.MillisBehindLatest)
	}
	if e.ContinuationSequenceNumber == nil {
		children := make([]string, len(e.ChildShards))
		for i, c := range e.ChildShards {
			children[i] = aws.ToString(c.ShardId)
		}
		s.log.Debug("kinesis: end of shard event", "children", children)
		return subEnded, nil
	}
	s.cont = *e.ContinuationSequenceNumber
	if len(e.Records) == 0 && aws.ToInt64(e.MillisBehindLatest) == 0 {
		switch ended, err := s.probeEnd(ctx); {
		case err != nil:
			return subFailed, err
		case ended:
			return subEnded, nil
		}
	}
	return subRenew, nil
}

// refusedFor returns, for err, a call of the reader answered
// ResourceNotFoundException, the error that names what is gone and the
// fix: the stream (ListShards answers so too: deleted while the receiver
// ran), or, when subscribing, only the consumer (its subscription refused
// while the stream and the shard are listed: deregistered by hand, or by
// another run's FanOut.DeregisterOnStop). It returns nil for any other
// error, and for a shard no longer listed (past retention; see
// goneFromStream).
func (s *shardSub) refusedFor(ctx context.Context, err error, subscribing bool) error {
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		return nil
	}
	shards, lerr := s.rn.listShards(ctx)
	switch {
	case errors.As(lerr, &notFound):
		// lerr names the stream and ends with the fix (withFix).
		return fmt.Errorf("the stream no longer exists (deleted while this receiver ran): %w; %w", err, lerr)
	case lerr != nil, !subscribing:
		return nil
	}
	for _, sh := range shards {
		if sh.ID == s.shard {
			return fmt.Errorf("%w (fix: the enhanced fan-out consumer %s was deregistered while this receiver ran, by hand or by another run's FanOut.DeregisterOnStop: start again, which registers it again)",
				err, s.fo.cfg.ConsumerName)
		}
	}
	return nil
}

// startingPosition is where the next subscription starts: after the last
// event delivered, or at the reader's start position before any.
func (s *shardSub) startingPosition() *types.StartingPosition {
	after := func(seq string) *types.StartingPosition {
		return &types.StartingPosition{Type: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String(seq)}
	}
	p := s.pos
	if !s.firstAt.IsZero() {
		p = p.pinned(s.firstAt) // LATEST as the first subscription resolved it
	}
	switch {
	case s.cont != "":
		return after(s.cont)
	case s.lastRead != "":
		return after(s.lastRead)
	case p.After != "":
		return after(p.After)
	case p.At != "":
		return &types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(p.At)}
	case p.Initial == Latest:
		return &types.StartingPosition{Type: types.ShardIteratorTypeLatest}
	case p.Initial == AtTimestamp:
		return &types.StartingPosition{Type: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(p.Timestamp)}
	}
	return &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}
}

// probeEnd is the safety net for an end-of-shard event that never comes,
// and for a stream deleted under a subscription that goes on (as
// kinesis-mock's does, sending empty events until its lifetime ends): at
// most once per ShardSyncInterval, a caught-up reader asks GetRecords,
// after the last record it delivered, whether the shard is closed and
// fully read (no records, no next iterator). Any error means no, but one
// that says the stream is gone, which it returns, with the fix
// (refusedFor).
func (s *shardSub) probeEnd(ctx context.Context) (bool, error) {
	now := s.rn.clock.Now()
	if !s.lastProbe.IsZero() && now.Sub(s.lastProbe) < s.rn.cfg.ShardSyncInterval {
		return false, nil
	}
	s.lastProbe = now
	it, err := s.rn.iterator(ctx, s.shard, resumeAt(s.pos, s.lastRead), 1)
	if errors.Is(err, errClosedEnd) {
		s.log.Info("kinesis: shard closed and read to its end, though no end-of-shard event came")
		return true, nil
	}
	if gone := s.refusedFor(ctx, err, false); gone != nil {
		return false, gone
	}
	if err != nil {
		s.log.Debug("kinesis: end-of-shard check failed", "err", err)
		return false, nil
	}
	out, err := getRecordsWith(ctx, s.rn.client, s.rn.retry, streamRef(s.rn.cfg.Stream), s.shard, it, 1, 1)
	if err != nil {
		if gone := s.refusedFor(ctx, err, false); gone != nil {
			return false, gone
		}
		s.log.Debug("kinesis: end-of-shard check failed", "err", err)
		return false, nil
	}
	if len(out.Records) == 0 && out.NextShardIterator == nil {
		s.log.Info("kinesis: shard closed and read to its end, though no end-of-shard event came")
		return true, nil
	}
	return false, nil
}

// typeName names an event's type for logs.
func typeName(v any) string {
	if u, ok := v.(*types.UnknownUnionMember); ok {
		return u.Tag
	}
	return "unknown"
}
