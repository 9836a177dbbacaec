package kinesis

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/lease"
	"github.com/weirstream/weir/source"
)

// TestLatestIteratorExpiredBeforeFirstRecord checks that a reader started
// at LATEST whose iterator expires before it read anything (a wait for the
// byte budget or a throttled streak longer than an iterator's 5 minutes)
// reads the records put meanwhile, instead of starting at the new tip past
// them; also when its clock runs a minute ahead of Kinesis's, where a time
// taken from it lies in Kinesis's future (Kinesis refuses the iterator, and
// after that time has come skips what was put before it): the time it
// first asked for an iterator is taken from the Date of Kinesis's answer.
func TestLatestIteratorExpiredBeforeFirstRecord(t *testing.T) {
	for _, ahead := range []time.Duration{0, time.Minute} {
		t.Run("clock ahead "+ahead.String(), func(t *testing.T) {
			env := servers.Env(t)
			stream := newStream(t, env, 1)
			before := payloads("before", 20) // put while the first iterator is unused
			after := payloads("after", 5)    // put once the reader has its next iterator
			var mu sync.Mutex
			calls := 0
			cfg := baseConfig(env, stream)
			cfg.InitialPosition = Latest
			cfg.Clock = aheadClock{ahead: ahead}
			cfg.Client = &hookClient{
				Client: env.Kinesis(),
				getRecords: func(ctx context.Context, in *awskinesis.GetRecordsInput, next Client) (*awskinesis.GetRecordsOutput, error) {
					mu.Lock()
					calls++
					n := calls
					mu.Unlock()
					switch n {
					case 1:
						if err := env.PutRecords(ctx, stream, before, nil); err != nil {
							t.Error(err)
						}
						return nil, &types.ExpiredIteratorException{Message: aws.String("Iterator has expired")}
					case 2:
						if err := env.PutRecords(ctx, stream, after, nil); err != nil {
							t.Error(err)
						}
					}
					return next.GetRecords(ctx, in)
				},
			}
			run := startReceiver(t, cfg, len(before)+len(after))
			run.wait(t)
			run.stop(t)
			checkExactlyOnce(t, append(before, after...), run.c.records())
		})
	}
}

// aheadClock is the wall clock of a machine whose clock runs ahead of
// Kinesis's (here, of kinesalite's) by ahead: Now is shifted, timers and
// tickers are the real ones.
type aheadClock struct {
	clock.Real
	ahead time.Duration
}

// Now returns the wall time plus c.ahead.
func (c aheadClock) Now() time.Time { return time.Now().Add(c.ahead) }

// TestFanOutLatestResubscribesAtItsStart checks that a fan-out reader
// started at LATEST whose first subscription failed before any event
// subscribes again at the time it first asked (less the pin's margin),
// not at the shard's new tip past the records put meanwhile: the Date of
// Kinesis's answer to the first subscription, on Kinesis's clock (here the
// fake's), when the answer has one, so that a reader whose clock runs a
// minute ahead does not subscribe at a time in Kinesis's future (which
// Kinesis refuses, or once it has come skips what was put before it), also
// when Kinesis refused that subscription (its refusal is dated); else the
// time on its own clock.
func TestFanOutLatestResubscribesAtItsStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dated bool
		ahead time.Duration
		// refused: the first subscription is refused, as one within 5 s of
		// the last run's subscription of the shard is.
		refused bool
	}{
		{"no Date", false, 0, false},
		{"Date, clock ahead", true, time.Minute, false},
		{"refusal's Date, clock ahead", true, time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				subs := &subscriptions{calls: make(chan *scriptedSub), refuse: make(chan error), dated: tc.dated}
				fake := &shardFake{consumerFake: consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}}
				cfg := Config{
					Stream: "s", App: "app", InitialPosition: Latest, Client: fake, Clock: aheadClock{ahead: tc.ahead},
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
				var s1 *scriptedSub
				if tc.refused {
					s1 = subs.next(t, &types.ResourceInUseException{Message: aws.String("another subscription is active")}, types.ShardIteratorTypeLatest, "")
				} else {
					s1 = subs.next(t, nil, types.ShardIteratorTypeLatest, "")
					s1.end(&types.InternalFailureException{Message: aws.String("oops")}) // before any event
				}
				s2 := subs.next(t, nil, types.ShardIteratorTypeAtTimestamp, "")
				want := s1.at.Add(-lease.LatestMargin)
				if tc.dated {
					want = s1.at.Truncate(time.Second).Add(-lease.LatestMargin)
				}
				if got := aws.ToTime(s2.in.StartingPosition.Timestamp); !got.Equal(want) {
					t.Errorf("second subscription at %v, want %v (the first one's start on Kinesis's clock less %v)", got, want, lease.LatestMargin)
				}
				s2.send(t, "3", 3)
				s2.end(nil)
				s3 := subs.next(t, nil, types.ShardIteratorTypeAfterSequenceNumber, "3")
				if err := r.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
				s3.end(nil)
				if err := <-errc; err != nil {
					t.Fatalf("Start: %v", err)
				}
			})
		})
	}
}
