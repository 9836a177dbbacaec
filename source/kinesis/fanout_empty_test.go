package kinesis

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/source"
)

// emptySub is a subscription whose event stream ends cleanly before any
// event, as the SDK gives one cut short before its first message.
type emptySub struct {
	ch chan types.SubscribeToShardEventStream
}

func (e emptySub) Events() <-chan types.SubscribeToShardEventStream { return e.ch }
func (e emptySub) Close() error                                     { return nil }
func (e emptySub) Err() error                                       { return nil }

// TestFanOutEmptySubscriptionsWarn: every subscription ends before its
// first event. The shard is never read: each counts as a retry
// (empty_subscription), with back-off, and the streak is warned about with
// the fix, rather than a subscription a second forever, said nowhere.
func TestFanOutEmptySubscriptionsWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		sub := func(context.Context, *awskinesis.SubscribeToShardInput) (eventStream, time.Time, error) {
			calls.Add(1)
			ch := make(chan types.SubscribeToShardEventStream)
			close(ch)
			return emptySub{ch}, time.Time{}, nil
		}
		fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
		logs := &logged{}
		r, err := New(Config{
			Stream: "s", App: "app", InitialPosition: TrimHorizon, Client: fake,
			Logger: slog.New(logs), FanOut: &FanOutConfig{subscribe: sub},
		})
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			errc <- r.Start(t.Context(), source.Runtime[Record]{Push: newCollector(0).push})
		}()
		const span = 10 * time.Minute
		time.Sleep(span) // virtual
		if err := r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("Start: %v", err)
		}
		retries := r.Stats().Retries["empty_subscription"]
		if n := calls.Load(); retries < n-1 || n > int64(span/(2*time.Second)) {
			t.Errorf("%d subscriptions in %v, %d counted as empty_subscription retries; want each counted, with back-off", n, span, retries)
		}
		warned := 0
		for _, rec := range logs.records() {
			if rec.attrs["cause"] == "empty_subscription" && strings.Contains(rec.attrs["fix"], "proxies") {
				warned++
			}
		}
		if warned == 0 {
			t.Errorf("no warning of subscriptions ending before their first event; logged: %+v", logs.records())
		}
	})
}
