package kinesis

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/source"
)

// gatedSink is a push function that keeps every block it is given and then
// waits, as a stalled pipeline does, until open is closed.
type gatedSink struct {
	open chan struct{}

	mu      sync.Mutex
	records []Record
}

func (s *gatedSink) push(ctx context.Context, b source.Block[Record]) (batch.BlockInfo, error) {
	s.mu.Lock()
	n := len(s.records)
	s.records = append(s.records, b.Records...)
	s.mu.Unlock()
	select {
	case <-s.open:
	case <-ctx.Done():
		return batch.BlockInfo{}, ctx.Err()
	}
	return batch.BlockInfo{ID: batch.BlockID{Seq: uint64(n)}, Ranges: b.Ranges, Count: len(b.Records)}, nil
}

func (s *gatedSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// bubbleClient returns a client of env's kinesalite for a reader run in a
// synctest bubble: it opens a connection for each call and closes it after,
// since an idle kept-alive connection's goroutine is never durably blocked
// and would stop the bubble's virtual time. Call it inside the bubble.
func bubbleClient(env *localaws.Env) *awskinesis.Client {
	return env.Kinesis(func(o *awskinesis.Options) {
		o.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	})
}

// TestGuardAskedAfterQueueWait checks, in virtual time on kinesalite, that
// a polling reader asks its lease guard whether it may deliver a page
// after it waited for room in the block generator's queue (a stalled
// pipeline), not before: a lease that went unrenewed during the wait holds
// the page back, so no record is added to a block once the lease may be
// another worker's.
func TestGuardAskedAfterQueueWait(t *testing.T) {
	const n = 100
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	if err := env.PutRecords(t.Context(), stream, payloads("r", n), nil); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		client := bubbleClient(env)
		shards, err := client.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		shard := aws.ToString(shards.Shards[0].ShardId)
		var hold atomic.Int64 // a lease.Hold
		cfg := Config{
			Stream: stream, App: "app", InitialPosition: TrimHorizon, Client: client,
			RecordsPerRead: 1, MinReadInterval: 5 * time.Millisecond, PollInterval: 5 * time.Millisecond,
		}
		readGuarded(&cfg, shard, &hold)
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sink := &gatedSink{open: make(chan struct{})}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: sink.push, BlockInterval: 10 * time.Millisecond})
		}()
		// The first push does not return: the generator's queue fills, and
		// the reader waits for room with a page read while the lease was
		// held.
		time.Sleep(time.Second)
		synctest.Wait()
		added := r.Stats().RecordsRead
		if added == 0 || added >= n {
			t.Fatalf("%d of %d records added with the pipeline stalled, want some and not all", added, n)
		}
		hold.Store(int64(lease.Lapsed)) // the lease went unrenewed meanwhile
		close(sink.open)                // the pipeline catches up
		time.Sleep(time.Second)
		synctest.Wait()
		if got := r.Stats().RecordsRead; got != added {
			t.Errorf("%d records added, %d of them after the lease lapsed, want none after", got, got-added)
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if got := sink.count(); int64(got) != added {
			t.Errorf("%d records pushed, want the %d added while the lease was held", got, added)
		}
	})
}

// TestFanOutGuardAskedAfterQueueWait is TestGuardAskedAfterQueueWait for
// a fan-out reader: an event it received while the block generator's
// queue was full is delivered only if the lease is still held once the
// queue has room.
func TestFanOutGuardAskedAfterQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		var hold atomic.Int64 // a lease.Hold
		cfg := Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			FanOut: &FanOutConfig{subscribe: subs.subscribe},
		}
		readGuarded(&cfg, "shard-0", &hold)
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		sink := &gatedSink{open: make(chan struct{})}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: sink.push, BlockInterval: 10 * time.Millisecond})
		}()
		s1 := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
		// One event a block: the first push never returns, so the queue
		// fills, and an event waits in it.
		const events = 20
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			for i := 1; i <= events; i++ {
				seq := strconv.Itoa(i)
				e := &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: types.SubscribeToShardEvent{
					MillisBehindLatest: aws.Int64(0), ContinuationSequenceNumber: aws.String(seq),
					Records: []types.Record{{SequenceNumber: aws.String(seq), PartitionKey: aws.String("k"), Data: []byte("r" + seq)}},
				}}
				select {
				case s1.events <- e:
				case <-s1.closed: // held back: the reader ended the subscription
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		added := r.Stats().RecordsRead
		if added == 0 || added >= events {
			t.Fatalf("%d of %d records added with the pipeline stalled, want some and not all", added, events)
		}
		hold.Store(int64(lease.Lapsed)) // the lease went unrenewed meanwhile
		close(sink.open)                // the pipeline catches up
		time.Sleep(time.Second)
		synctest.Wait()
		if got := r.Stats().RecordsRead; got != added {
			t.Errorf("%d records added, %d of them after the lease lapsed, want none after", got, got-added)
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		s1.end(nil)
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		<-sent
	})
}

// TestHeldBackReaderDoesNotRead checks, in virtual time on kinesalite,
// that a polling reader whose lease says no does not call GetRecords
// until it says yes: pages it would only drop would take the shard's read
// limits (5 calls/s, 2 MB/s, shared) from the worker that may own the
// lease by now.
func TestHeldBackReaderDoesNotRead(t *testing.T) {
	env := servers.Env(t)
	stream := newStream(t, env, 1)
	if err := env.PutRecords(t.Context(), stream, payloads("r", 10), nil); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		client := &hookClient{
			Client: bubbleClient(env),
			getRecords: func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error) {
				calls.Add(1)
				return next.GetRecords(ctx, in)
			},
		}
		shards, err := client.ListShards(t.Context(), &awskinesis.ListShardsInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		shard := aws.ToString(shards.Shards[0].ShardId)
		var hold atomic.Int64
		hold.Store(int64(lease.Lapsed))
		cfg := Config{Stream: stream, App: "app", InitialPosition: TrimHorizon, Client: client}
		readGuarded(&cfg, shard, &hold)
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push, BlockInterval: 10 * time.Millisecond})
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := calls.Load(); n > 1 {
			t.Errorf("%d GetRecords calls in a minute while the lease said no, want at most the first", n)
		}
		hold.Store(int64(lease.Held))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		checkExactlyOnce(t, payloads("r", 10), c.records())
	})
}

// TestHeldBackFanOutReaderDoesNotSubscribe is TestHeldBackReaderDoesNotRead
// for a fan-out reader: while its lease says no, it does not subscribe.
func TestHeldBackFanOutReaderDoesNotSubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		var hold atomic.Int64
		hold.Store(int64(lease.Lapsed))
		cfg := Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			FanOut: &FanOutConfig{subscribe: subs.subscribe},
		}
		readGuarded(&cfg, "shard-0", &hold)
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(0)
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push, BlockInterval: 10 * time.Millisecond})
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case sub := <-subs.calls:
			t.Errorf("subscribed (%v) while the lease said no", sub.in.StartingPosition.Type)
			subs.refuse <- errors.New("test: refused")
		default:
		}
		hold.Store(int64(lease.Held))
		s1 := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
		s1.send(t, "1", 1)
		synctest.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		s1.end(nil)
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if got := len(c.records()); got != 1 {
			t.Errorf("%d records delivered, want 1", got)
		}
	})
}

// readGuarded makes cfg's assigner start one reader of shard, from
// TRIM_HORIZON, whose lease guard answers what hold holds (a lease.Hold).
func readGuarded(cfg *Config, shard string, hold *atomic.Int64) {
	cfg.assigner = assignerFunc(func(ctx context.Context, c *control) error {
		guard := func() lease.Hold { return lease.Hold(hold.Load()) }
		if err := c.startShard(shard, position{Initial: TrimHorizon}, readerHooks{guard: guard}); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
}
