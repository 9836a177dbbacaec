package kinesis

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/source"
)

// TestFanOutBudgetWaitIsNoIdleSubscription checks that a fan-out reader
// that waited longer than the idle timeout for room in the byte budget (a
// slow pipeline) goes on with its subscription: the wait is the reader's,
// not a silent connection, so it neither subscribes again nor counts an
// idle_subscription retry.
func TestFanOutBudgetWaitIsNoIdleSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		const idle = 5 * time.Second
		cfg := Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			FanOut: &FanOutConfig{idleTimeout: idle, subscribe: subs.subscribe},
		}
		r, c, errc, s1 := startBudgetWait(t, cfg, subs)
		time.Sleep(3 * idle)
		synctest.Wait()
		complete := func() { // the pipeline catches up
			time.Sleep(50 * time.Millisecond) // virtual time: the blocks are sealed and pushed
			var infos []batch.BlockInfo
			for _, b := range c.snapshot() {
				infos = append(infos, b.info)
			}
			r.blocksCompleted(context.Background(), infos)
			synctest.Wait()
		}
		complete()
		s1.send(t, "3", 3) // the same subscription goes on
		synctest.Wait()
		complete()
		if got := r.Stats().Retries[string(causeIdleSubscription)]; got != 0 {
			t.Errorf("%d idle_subscription retries after a wait for the budget, want 0", got)
		}
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		s1.end(nil)
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		var seqs []string
		for _, rec := range c.records() {
			seqs = append(seqs, rec.SequenceNumber)
		}
		if len(seqs) != 3 {
			t.Errorf("records %v, want 1, 2, 3", seqs)
		}
	})
}

// TestFanOutGuardAskedAfterBudgetWait checks that a fan-out reader asks
// its lease guard whether it may deliver an event's records after it
// waited for room in the byte budget, not before: a lease that went
// unrenewed during the wait (a slow pipeline and a lease table out of
// reach) holds the records back, as the polling reader's does.
func TestFanOutGuardAskedAfterBudgetWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error)}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		var hold atomic.Int64 // a lease.Hold
		cfg := Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			FanOut: &FanOutConfig{subscribe: subs.subscribe},
		}
		readGuarded(&cfg, "shard-0", &hold)
		r, c, errc, s1 := startBudgetWait(t, cfg, subs)
		time.Sleep(time.Second)
		hold.Store(int64(lease.Lapsed)) // the lease went unrenewed meanwhile
		var infos []batch.BlockInfo
		for _, b := range c.snapshot() {
			infos = append(infos, b.info)
		}
		r.blocksCompleted(context.Background(), infos) // the pipeline catches up
		time.Sleep(time.Second)
		synctest.Wait()
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		s1.end(nil)
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		var seqs []string
		for _, rec := range c.records() {
			seqs = append(seqs, rec.SequenceNumber)
		}
		if diff := cmp.Diff([]string{"1"}, seqs); diff != "" {
			t.Errorf("records delivered (-want +got):\n%s", diff)
		}
	})
}

// startBudgetWait starts a fan-out receiver of cfg, whose subscriptions are
// subs, with a budget of one byte, and sends records 1 and 2 on its first
// subscription: record 2 then waits until the block of record 1 is
// completed. It returns the receiver, its blocks, Start's error to come,
// and the subscription.
func startBudgetWait(t *testing.T, cfg Config, subs *subscriptions) (*Receiver, *collector, chan error, *scriptedSub) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector(0)
	errc := make(chan error, 1)
	go func() {
		errc <- r.Start(t.Context(), source.Runtime[Record]{Push: c.push, BlockInterval: 10 * time.Millisecond, MaxBufferedBytes: 1})
	}()
	s1 := subs.next(t, nil, types.ShardIteratorTypeTrimHorizon, "")
	s1.send(t, "1", 1)
	s1.send(t, "2", 2)
	return r, c, errc, s1
}
