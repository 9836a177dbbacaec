package kinesis

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/internal/streak"
	"github.com/weirstream/weir/source"
)

// scriptedSub is one subscription a test scripts: it sends the events and
// ends it.
type scriptedSub struct {
	in     *awskinesis.SubscribeToShardInput
	at     time.Time // when it was asked for
	events chan types.SubscribeToShardEventStream
	closed chan struct{}
	once   sync.Once
	err    error // set before events is closed
}

func (s *scriptedSub) Events() <-chan types.SubscribeToShardEventStream { return s.events }
func (s *scriptedSub) Close() error                                     { s.once.Do(func() { close(s.closed) }); return nil }
func (s *scriptedSub) Err() error                                       { return s.err }

// send sends an event with records seqs (decimal sequence numbers) and
// continuation cont ("" for none: the shard's end).
func (s *scriptedSub) send(t *testing.T, cont string, seqs ...int) {
	t.Helper()
	e := types.SubscribeToShardEvent{MillisBehindLatest: aws.Int64(0)}
	for _, n := range seqs {
		seq := strconv.Itoa(n)
		e.Records = append(e.Records, types.Record{SequenceNumber: aws.String(seq), PartitionKey: aws.String("k"), Data: []byte("r" + seq)})
	}
	if cont != "" {
		e.ContinuationSequenceNumber = aws.String(cont)
	} else {
		e.ChildShards = []types.ChildShard{{ShardId: aws.String("shard-1"), ParentShards: []string{"shard-0"}}}
	}
	select {
	case s.events <- &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: e}:
	case <-s.closed:
		t.Fatalf("subscription closed before an event with %v", seqs)
	}
}

// end ends the subscription with err (nil: as Kinesis does after 5 minutes).
func (s *scriptedSub) end(err error) {
	s.err = err
	close(s.events)
}

// subscriptions is a FanOutConfig.subscribe that hands every call to the
// test: refuse answers it with an error, and otherwise the test gets the
// subscription to script.
type subscriptions struct {
	calls  chan *scriptedSub
	refuse chan error // the answer to each call: nil accepts
	// dated: an accepted answer carries a Date, its time in whole seconds,
	// as the SDK's response metadata gives it; else none, as from a fake.
	dated bool
}

func (s *subscriptions) subscribe(ctx context.Context, in *awskinesis.SubscribeToShardInput) (eventStream, time.Time, error) {
	sub := &scriptedSub{in: in, at: time.Now(), events: make(chan types.SubscribeToShardEventStream), closed: make(chan struct{})}
	select {
	case s.calls <- sub:
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	}
	if err := <-s.refuse; err != nil {
		if s.dated { // a refusal is an answer too
			return nil, sub.at.Truncate(time.Second), err
		}
		return nil, time.Time{}, err
	}
	if s.dated {
		return sub, sub.at.Truncate(time.Second), nil
	}
	return sub, time.Time{}, nil
}

// next returns the next call, answered with refusal (nil accepts it), and
// checks where it starts.
func (s *subscriptions) next(t *testing.T, refusal error, typ types.ShardIteratorType, seq string) *scriptedSub {
	t.Helper()
	sub := <-s.calls
	s.refuse <- refusal
	got := sub.in.StartingPosition
	if got.Type != typ || aws.ToString(got.SequenceNumber) != seq || aws.ToString(sub.in.ShardId) != "shard-0" || aws.ToString(sub.in.ConsumerARN) != fakeConsumerARN {
		t.Fatalf("subscription %+v from %s %q, want shard-0 of %s from %s %q", *sub.in, got.Type, aws.ToString(got.SequenceNumber), fakeConsumerARN, typ, seq)
	}
	return sub
}

// shardFake is the rest of the client a scripted fan-out receiver calls:
// one open shard, and the end-of-shard check's GetRecords.
type shardFake struct {
	consumerFake
	mu     sync.Mutex
	probes int
	// noIterator: GetShardIterator answers no iterator, as for a closed
	// shard read to its end.
	noIterator bool
}

func (f *shardFake) ListShards(context.Context, *awskinesis.ListShardsInput, ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	return &awskinesis.ListShardsOutput{Shards: []types.Shard{{ShardId: aws.String("shard-0")}}}, nil
}

func (f *shardFake) GetShardIterator(context.Context, *awskinesis.GetShardIteratorInput, ...func(*awskinesis.Options)) (*awskinesis.GetShardIteratorOutput, error) {
	if f.noIterator {
		return &awskinesis.GetShardIteratorOutput{}, nil
	}
	return &awskinesis.GetShardIteratorOutput{ShardIterator: aws.String("it")}, nil
}

func (f *shardFake) GetRecords(context.Context, *awskinesis.GetRecordsInput, ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	f.mu.Lock()
	f.probes++
	f.mu.Unlock()
	return &awskinesis.GetRecordsOutput{NextShardIterator: aws.String("it2"), MillisBehindLatest: aws.Int64(0)}, nil
}

// TestFanOutSubscriptionLifecycle scripts one shard's subscriptions in
// virtual time: where each starts, when the next one is asked for (at most
// one a second, after the lifetime, after an idle connection, after errors
// with back-off), and the shard's end.
func TestFanOutSubscriptionLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		const lifetime, idle = 20 * time.Second, 5 * time.Second
		cfg := Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second,
			FanOut: &FanOutConfig{lifetime: lifetime, idleTimeout: idle, subscribe: subs.subscribe},
		}
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		var ended []string
		r.cfg.onShardEnd = func(_ context.Context, shard, lastSeq string) { ended = append(ended, shard+"@"+lastSeq) }
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push, BlockInterval: 10 * time.Millisecond})
		}()

		// The first subscription starts at the initial position, and ends
		// as Kinesis ends one: the next one starts after the continuation,
		// a second after the first call at the earliest.
		s1 := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
		s1.send(t, "2", 1, 2)
		s1.end(nil)
		s2 := subs.next(t, nil, types.ShardIteratorTypeAfterSequenceNumber, "2")
		if d := s2.at.Sub(s1.at); d < time.Second {
			t.Errorf("second subscription %v after the first, want >= 1s", d)
		}

		// A continuation past the last record (an idle shard) is where
		// the next one starts; a connection silent for idleTimeout is
		// given up.
		s2.send(t, "5")
		s3 := subs.next(t, nil, types.ShardIteratorTypeAfterSequenceNumber, "5")
		if d := s3.at.Sub(s2.at); d < idle {
			t.Errorf("subscription after a silent one: %v, want >= %v", d, idle)
		}

		// Refused (ResourceInUseException, then a server error): asked
		// again from the same position, with back-off, at most once a
		// second.
		s3.end(&types.ResourceInUseException{Message: aws.String("taken over")})
		s4 := subs.next(t, &types.InternalFailureException{Message: aws.String("oops")}, types.ShardIteratorTypeAfterSequenceNumber, "5")
		s5 := subs.next(t, nil, types.ShardIteratorTypeAfterSequenceNumber, "5")
		if d := s5.at.Sub(s4.at); d < time.Second {
			t.Errorf("subscription after a refused one: %v, want >= 1s", d)
		}

		// Kinesis did not end it within its lifetime: the reader does.
		start := time.Now()
		for i := 6; time.Since(start) < lifetime; i += 2 {
			s5.send(t, strconv.Itoa(i+1), i, i+1)
			time.Sleep(idle / 2) // virtual time: events keep the connection alive
		}
		s6 := subs.next(t, nil, types.ShardIteratorTypeAfterSequenceNumber, strconv.Itoa(6+2*int(lifetime/(idle/2))-1))
		if d := s6.at.Sub(s5.at); d < lifetime {
			t.Errorf("subscription renewed after %v, want >= the %v lifetime", d, lifetime)
		}

		// The shard's end: an event without a continuation.
		s6.send(t, "", 100)
		synctest.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}

		var seqs []string
		for _, rec := range c.records() {
			seqs = append(seqs, rec.SequenceNumber)
		}
		want := []string{"1", "2"}
		for i := 6; i < 6+2*int(lifetime/(idle/2)); i++ {
			want = append(want, strconv.Itoa(i))
		}
		want = append(want, "100")
		if diff := cmp.Diff(want, seqs); diff != "" {
			t.Errorf("records (-want +got):\n%s", diff)
		}
		for _, b := range c.snapshot() {
			if len(b.info.Ranges) == 0 {
				t.Errorf("block %v without ranges", b.info.ID)
			}
		}
		if diff := cmp.Diff([]string{"shard-0@100"}, ended); diff != "" {
			t.Errorf("onShardEnd calls (-want +got):\n%s", diff)
		}
		retries := r.Stats().Retries
		if retries[string(causeResourceInUse)] != 1 || retries[string(causeServerError)] != 1 {
			t.Errorf("retries %v, want one resource_in_use and one server_error", retries)
		}
		if fake.probes != 1 {
			t.Errorf("%d end-of-shard checks, want 1 (one idle event)", fake.probes)
		}
	})
}

// TestFanOutStartingPositions checks where a reader's first subscription
// starts for each kind of position.
func TestFanOutStartingPositions(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		pos  position
		want types.StartingPosition
	}{
		{position{After: "7"}, types.StartingPosition{Type: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String("7")}},
		{position{At: "7", AtSubSequence: 3}, types.StartingPosition{Type: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String("7")}},
		{position{Initial: Latest}, types.StartingPosition{Type: types.ShardIteratorTypeLatest}},
		{position{Initial: TrimHorizon}, types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}},
		{position{}, types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}},
		{position{Initial: AtTimestamp, Timestamp: at}, types.StartingPosition{Type: types.ShardIteratorTypeAtTimestamp, Timestamp: aws.Time(at)}},
	}
	for _, tt := range tests {
		s := &shardSub{pos: tt.pos}
		if diff := cmp.Diff(tt.want, *s.startingPosition(), cmp.AllowUnexported(types.StartingPosition{})); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tt.pos, diff)
		}
	}
	s := &shardSub{pos: position{At: "7"}, lastRead: "9"}
	if got := s.startingPosition(); got.Type != types.ShardIteratorTypeAfterSequenceNumber || aws.ToString(got.SequenceNumber) != "9" {
		t.Errorf("after a record read: %s %s, want AFTER_SEQUENCE_NUMBER 9", got.Type, aws.ToString(got.SequenceNumber))
	}
}

func TestFanOutFatalErrorStopsTheReceiver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		r, err := New(Config{Stream: "s", App: "app", Client: fake, FanOut: &FanOutConfig{subscribe: subs.subscribe}})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: newCollector(0).push})
		}()
		denied := &types.AccessDeniedException{Message: aws.String("not allowed")}
		subs.next(t, nil, types.ShardIteratorTypeLatest, "").end(denied)
		if err := <-errc; !errors.As(err, &denied) {
			t.Fatalf("Start = %v, want the AccessDeniedException", err)
		}
	})
}

// TestFanOutRefusedSubscriptionsWarn has a shard's subscriptions refused
// again and again (another subscription of the consumer holds the shard):
// the reader retries them, and says so at WARN as the polling reader's
// calls do (internal/streak), not only at DEBUG: it reads nothing
// meanwhile.
func TestFanOutRefusedSubscriptionsWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		logs := &logged{}
		r, err := New(Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second,
			Logger: slog.New(logs),
			FanOut: &FanOutConfig{subscribe: subs.subscribe},
		})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: newCollector(0).push, BlockInterval: 10 * time.Millisecond})
		}()
		inUse := &types.ResourceInUseException{Message: aws.String("another subscription holds the shard")}
		for range streak.WarnAt {
			subs.next(t, inUse, types.ShardIteratorTypeTrimHorizon, "")
		}
		s := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
		s.send(t, "2", 1, 2)
		s.end(nil) // the streak is over
		// One refusal later is no streak to warn about, nor to say over.
		subs.next(t, inUse, types.ShardIteratorTypeAfterSequenceNumber, "2")
		s = subs.next(t, nil, types.ShardIteratorTypeAfterSequenceNumber, "2")
		s.send(t, "4", 3, 4)
		s.end(nil)
		subs.next(t, nil, types.ShardIteratorTypeAfterSequenceNumber, "4")
		synctest.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		warned, over := 0, 0
		for _, rec := range logs.records() {
			a := rec.attrs
			switch {
			case a["op"] != "SubscribeToShard" || a["shard"] != "shard-0":
			case a["cause"] == "resource_in_use" && strings.Contains(a["fix"], "FanOutConfig.ConsumerName"):
				warned++
			case a["failed_attempts"] != "":
				over++
			}
		}
		if warned != 1 || over != 1 {
			t.Errorf("%d warnings of refused subscriptions (with the fix) and %d of their end, want 1 and 1 (%d refused in a row, then one); logged: %+v",
				warned, over, streak.WarnAt, logs.records())
		}
	})
}

// TestFanOutShardGoneFromStream has a shard's subscription refused with
// ResourceNotFoundException once the stream no longer lists the shard (a
// closed shard past its retention): the reader takes it as read to its
// end, as the polling reader does (TestLeasesShardGoneFromStream), rather
// than fail the receiver.
func TestFanOutShardGoneFromStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &goneFake{shardFake: shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}}
		cfg := Config{Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake, FanOut: &FanOutConfig{subscribe: subs.subscribe}}
		runUntilGone(t, cfg, func() {
			<-subs.calls
			fake.gone.Store(true)
			subs.refuse <- &types.ResourceNotFoundException{Message: aws.String("Shard shard-0 does not exist")}
		})
	})
}

// runUntilGone runs a receiver of cfg in a synctest bubble, calls gone,
// which makes its one shard, shard-0, leave the stream, and checks that
// the receiver took the shard as read to its end and stopped without an
// error.
func runUntilGone(t *testing.T, cfg Config, gone func()) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ended []string
	r.cfg.onShardEnd = func(_ context.Context, shard, _ string) { ended = append(ended, shard) }
	errc := make(chan error, 1)
	go func() {
		errc <- r.Start(t.Context(), source.Runtime[Record]{Push: newCollector(0).push, BlockInterval: 10 * time.Millisecond})
	}()
	gone()
	synctest.Wait()
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if diff := cmp.Diff([]string{"shard-0"}, ended); diff != "" {
		t.Errorf("shards ended (-want +got):\n%s", diff)
	}
}

// goneFake is a shardFake whose shard leaves the shard list once gone is
// set; with goneOnRead, the first GetRecords call sets it, and the next
// ones answer ResourceNotFoundException.
type goneFake struct {
	shardFake
	gone       atomic.Bool
	goneOnRead bool
}

func (f *goneFake) GetRecords(ctx context.Context, in *awskinesis.GetRecordsInput, o ...func(*awskinesis.Options)) (*awskinesis.GetRecordsOutput, error) {
	if f.goneOnRead && f.gone.Swap(true) {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Shard shard-0 does not exist")}
	}
	return f.shardFake.GetRecords(ctx, in, o...)
}

func (f *goneFake) ListShards(ctx context.Context, in *awskinesis.ListShardsInput, o ...func(*awskinesis.Options)) (*awskinesis.ListShardsOutput, error) {
	if f.gone.Load() {
		return &awskinesis.ListShardsOutput{}, nil
	}
	return f.shardFake.ListShards(ctx, in, o...)
}

// TestPollingShardGoneWhileRead has GetRecords answer
// ResourceNotFoundException once the stream no longer lists the shard
// being read (a closed shard that passed its retention period while its
// reader lagged): the reader takes it as read to its end, as the KCL
// does, rather than fail the receiver.
func TestPollingShardGoneWhileRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := &goneFake{shardFake: shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}}
		fake.goneOnRead = true
		runUntilGone(t, Config{Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake}, func() {
			time.Sleep(time.Second) // virtual time: the reader reads, and the shard goes
		})
	})
}

// TestFanOutSilentSubscriptionsWarn has every subscription of a shard
// accepted and then silent (a proxy holding the event stream back): the
// reader subscribes again after each idle timeout, and reads nothing. That
// stall must be said at WARN, as refused subscriptions are
// (TestFanOutRefusedSubscriptionsWarn), not only at DEBUG, and counted in
// Stats.Retries.
func TestFanOutSilentSubscriptionsWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		logs := &logged{}
		const idle = 5 * time.Second
		r, err := New(Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second,
			Logger: slog.New(logs),
			FanOut: &FanOutConfig{idleTimeout: idle, subscribe: subs.subscribe},
		})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: newCollector(0).push, BlockInterval: 10 * time.Millisecond})
		}()
		for range streak.WarnAt {
			subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "") // never sends an event
		}
		// The stall is over once a subscription delivers.
		s := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
		s.send(t, "2", 1, 2)
		s.end(nil)
		subs.next(t, nil, types.ShardIteratorTypeAfterSequenceNumber, "2")
		synctest.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		warned, over := 0, 0
		for _, rec := range logs.records() {
			a := rec.attrs
			switch {
			case a["op"] != "SubscribeToShard" || a["shard"] != "shard-0":
			case a["cause"] == string(causeIdleSubscription) && strings.Contains(a["fix"], "proxies"):
				warned++
			case a["failed_attempts"] != "":
				over++
			}
		}
		if warned != 1 || over != 1 {
			t.Errorf("%d warnings of silent subscriptions (with the fix) and %d of their end, want 1 and 1 (%d silent in a row); logged: %+v",
				warned, over, streak.WarnAt, logs.records())
		}
		if got := r.Stats().Retries[string(causeIdleSubscription)]; got != streak.WarnAt {
			t.Errorf("Retries[%s] = %d, want %d", causeIdleSubscription, got, streak.WarnAt)
		}
	})
}

// TestFanOutRetriesCountedPerShard checks that a fan-out reader's refused
// and silent subscriptions are counted in its shard's Stats, as a polling
// reader's retried calls are: ShardStats.Retries, and the per-shard
// throttling a lag warning names, would otherwise hide them.
func TestFanOutRetriesCountedPerShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		cfg := Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second,
			FanOut: &FanOutConfig{subscribe: subs.subscribe},
		}
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push, BlockInterval: 10 * time.Millisecond})
		}()
		subs.next(t, &types.ResourceInUseException{Message: aws.String("taken over")}, types.ShardIteratorTypeTrimHorizon, "")
		subs.next(t, &types.LimitExceededException{Message: aws.String("rate exceeded")}, types.ShardIteratorTypeTrimHorizon, "")
		s := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
		s.send(t, "1", 1)
		synctest.Wait()
		got := r.Stats().Shards["shard-0"].Retries
		want := map[string]int64{string(causeResourceInUse): 1, string(causeLimitExceeded): 1}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("shard-0's retries (-want +got):\n%s", diff)
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.end(nil)
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
	})
}
