package kinesis

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/weirstream/weir/clock"
)

// consumerFake answers the consumer calls of registration from a script of
// statuses; it is a unit-test fake, the real calls are tested on
// kinesis-mock (TestFanOutOnKinesisMock).
type consumerFake struct {
	Client // nil: calls not scripted panic

	mu sync.Mutex
	// describes is the status each DescribeStreamConsumer returns, in
	// order, the last one repeated; "" is ResourceNotFoundException.
	describes []types.ConsumerStatus
	// registerErr is what RegisterStreamConsumer returns.
	registerErr  error
	described    []*awskinesis.DescribeStreamConsumerInput
	registered   int
	deregistered []string
}

const fakeStreamARN = "arn:aws:kinesis:us-east-1:123456789012:stream/s"
const fakeConsumerARN = fakeStreamARN + "/consumer/app:1"

func (f *consumerFake) DescribeStreamSummary(context.Context, *awskinesis.DescribeStreamSummaryInput, ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamSummaryOutput, error) {
	return &awskinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{StreamARN: aws.String(fakeStreamARN)}}, nil
}

func (f *consumerFake) DescribeStreamConsumer(_ context.Context, in *awskinesis.DescribeStreamConsumerInput, _ ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.described = append(f.described, in)
	status := f.describes[0]
	if len(f.describes) > 1 {
		f.describes = f.describes[1:]
	}
	if status == "" {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no such consumer")}
	}
	return &awskinesis.DescribeStreamConsumerOutput{ConsumerDescription: &types.ConsumerDescription{
		ConsumerARN: aws.String(fakeConsumerARN), ConsumerName: aws.String("app"), ConsumerStatus: status, StreamARN: aws.String(fakeStreamARN),
	}}, nil
}

func (f *consumerFake) RegisterStreamConsumer(_ context.Context, in *awskinesis.RegisterStreamConsumerInput, _ ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registered++
	if aws.ToString(in.StreamARN) != fakeStreamARN || aws.ToString(in.ConsumerName) != "app" {
		return nil, &types.InvalidArgumentException{Message: aws.String("unexpected input")}
	}
	if f.registerErr != nil {
		return nil, f.registerErr
	}
	return &awskinesis.RegisterStreamConsumerOutput{Consumer: &types.Consumer{ConsumerARN: aws.String(fakeConsumerARN), ConsumerName: in.ConsumerName, ConsumerStatus: types.ConsumerStatusCreating}}, nil
}

func (f *consumerFake) DeregisterStreamConsumer(_ context.Context, in *awskinesis.DeregisterStreamConsumerInput, _ ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deregistered = append(f.deregistered, aws.ToString(in.ConsumerARN))
	return &awskinesis.DeregisterStreamConsumerOutput{}, nil
}

func (f *consumerFake) SubscribeToShard(context.Context, *awskinesis.SubscribeToShardInput, ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error) {
	return nil, errors.New("consumerFake: SubscribeToShard is not scripted")
}

// fanOutRun returns a run of a receiver of cfg (with fake as its client)
// on the real clock: under synctest, virtual time.
func fanOutRun(t *testing.T, fake *consumerFake, fo FanOutConfig) *run {
	t.Helper()
	r, err := New(Config{Stream: "s", App: "app", Client: fake, FanOut: &fo, RetryBaseDelay: 100 * time.Millisecond, RetryMaxDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	return &run{
		r: r, cfg: r.cfg, client: fake, clock: clock.Real{}, logger: logger,
		retry: &retrier{clock: clock.Real{}, base: r.cfg.RetryBaseDelay, max: r.cfg.RetryMaxDelay, stats: &r.stats, logger: logger},
	}
}

func TestFanOutConsumerRegistration(t *testing.T) {
	notFound := types.ConsumerStatus("")
	creating, active, deleting := types.ConsumerStatusCreating, types.ConsumerStatusActive, types.ConsumerStatusDeleting
	tests := []struct {
		name        string
		describes   []types.ConsumerStatus
		registerErr error
		fo          FanOutConfig
		registers   int
		want        string // error substring; "" for success
	}{
		{name: "reuses an active consumer", describes: []types.ConsumerStatus{active}},
		{name: "waits for one being created", describes: []types.ConsumerStatus{creating, creating, creating, active}},
		{name: "registers a missing one and waits until ACTIVE", describes: []types.ConsumerStatus{notFound, creating, creating, active}, registers: 1},
		{name: "another worker registered it first", describes: []types.ConsumerStatus{notFound, creating, active}, registers: 1,
			registerErr: &types.ResourceInUseException{Message: aws.String("Consumer app exists")}},
		{name: "registers again one being deleted", describes: []types.ConsumerStatus{deleting, deleting, notFound, creating, active}, registers: 1},
		{name: "given by ARN", describes: []types.ConsumerStatus{creating, active}, fo: FanOutConfig{ConsumerARN: fakeConsumerARN}},
		{name: "not ACTIVE in time", describes: []types.ConsumerStatus{creating}, fo: FanOutConfig{RegisterTimeout: time.Minute},
			want: `consumer "app" of stream s: not ACTIVE within FanOut.RegisterTimeout (1m0s)`},
		{name: "registration refused", describes: []types.ConsumerStatus{notFound}, registers: 1,
			registerErr: &types.InvalidArgumentException{Message: aws.String("no")}, want: "registering it: InvalidArgumentException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := &consumerFake{describes: tt.describes, registerErr: tt.registerErr}
				rn := fanOutRun(t, fake, tt.fo)
				ok, err := rn.startFanOut(t.Context())
				if tt.want != "" {
					if ok || err == nil || !strings.Contains(err.Error(), tt.want) {
						t.Fatalf("startFanOut = %v, %v; want an error with %q", ok, err, tt.want)
					}
				} else if !ok || err != nil || rn.fanOut == nil || rn.fanOut.consumerARN != fakeConsumerARN {
					t.Fatalf("startFanOut = %v, %v, consumer %+v; want %s", ok, err, rn.fanOut, fakeConsumerARN)
				}
				if fake.registered != tt.registers {
					t.Errorf("%d RegisterStreamConsumer calls, want %d", fake.registered, tt.registers)
				}
				for _, in := range fake.described {
					byARN := aws.ToString(in.ConsumerARN) == fakeConsumerARN && in.StreamARN == nil && in.ConsumerName == nil
					byName := aws.ToString(in.StreamARN) == fakeStreamARN && aws.ToString(in.ConsumerName) == "app" && in.ConsumerARN == nil
					if tt.fo.ConsumerARN != "" && !byARN || tt.fo.ConsumerARN == "" && !byName {
						t.Errorf("DescribeStreamConsumer input %+v", *in)
					}
				}
			})
		})
	}
}

func TestFanOutDeregistersOnlyWhenAsked(t *testing.T) {
	for _, deregister := range []bool{false, true} {
		fake := &consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}}
		rn := fanOutRun(t, fake, FanOutConfig{DeregisterOnStop: deregister})
		if ok, err := rn.startFanOut(t.Context()); !ok || err != nil {
			t.Fatalf("startFanOut = %v, %v", ok, err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // a cancelled Start still deregisters
		rn.stopFanOut(ctx)
		var want []string
		if deregister {
			want = []string{fakeConsumerARN}
		}
		if len(fake.deregistered) != len(want) || len(want) == 1 && fake.deregistered[0] != want[0] {
			t.Errorf("DeregisterOnStop %v: deregistered %v, want %v", deregister, fake.deregistered, want)
		}
	}
}

func TestFanOutStartStopsOnStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := &consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusCreating}}
		rn := fanOutRun(t, fake, FanOutConfig{})
		type result struct {
			ok  bool
			err error
		}
		done := make(chan result, 1)
		go func() {
			ok, err := rn.startFanOut(t.Context())
			done <- result{ok, err}
		}()
		synctest.Wait() // waiting for the consumer to become ACTIVE
		if err := rn.r.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res.ok || res.err != nil {
			t.Fatalf("startFanOut after Stop = %v, %v; want false, nil", res.ok, res.err)
		}
	})
}

// TestSubscribeRefusalDated checks that a SubscribeToShard Kinesis refused
// (ResourceInUseException: a call within 5 s of the last successful one for
// the consumer and shard, as a restarted reader makes) returns the Date of
// the refusal, through the SDK's real
// error chain, so that a fan-out reader at LATEST whose first subscription
// was refused pins its start on Kinesis's clock, not its own (see
// position.pinned).
func TestSubscribeRefusalDated(t *testing.T) {
	date := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) // far from this machine's clock
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", date.Format(http.TimeFormat))
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"ResourceInUseException","message":"Another active subscription exists for this consumer"}`)
	}))
	defer srv.Close()
	client := awskinesis.New(awskinesis.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("key", "secret", ""),
	})
	_, got, err := subscribeWith(client)(t.Context(), &awskinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(fakeConsumerARN), ShardId: aws.String("shard-0"),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeLatest},
	})
	var inUse *types.ResourceInUseException
	if !errors.As(err, &inUse) {
		t.Fatalf("subscribe: %v, want a ResourceInUseException", err)
	}
	if !got.Equal(date) {
		t.Errorf("the refusal dated %v, want its Date header's %v", got, date)
	}
}

// recordFunc is a slog.Handler that hands every record, of any level, to
// the func.
type recordFunc func(slog.Record)

func (f recordFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (f recordFunc) Handle(_ context.Context, r slog.Record) error { f(r); return nil }
func (f recordFunc) WithAttrs([]slog.Attr) slog.Handler            { return f }
func (f recordFunc) WithGroup(string) slog.Handler                 { return f }

// slowConsumerFake is a consumerFake whose consumer is CREATING until
// activeAt (virtual time, under synctest), then ACTIVE.
type slowConsumerFake struct {
	*consumerFake
	activeAt time.Time
}

func (f *slowConsumerFake) DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, o ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error) {
	out, err := f.consumerFake.DescribeStreamConsumer(ctx, in, o...)
	if err == nil && time.Now().Before(f.activeAt) {
		out.ConsumerDescription.ConsumerStatus = types.ConsumerStatusCreating
	}
	return out, err
}

// TestFanOutSlowConsumerWarns waits 90 s for a consumer to become ACTIVE,
// with the default RegisterTimeout (2 minutes): no shard is read
// meanwhile, and the wait is logged at WARN once, after 30 s, with the
// fix, then its end at INFO. Before, the wait logged nothing above DEBUG
// until RegisterTimeout failed Start.
func TestFanOutSlowConsumerWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := &slowConsumerFake{consumerFake: &consumerFake{describes: []types.ConsumerStatus{types.ConsumerStatusActive}},
			activeAt: time.Now().Add(90 * time.Second)}
		rn := fanOutRun(t, fake.consumerFake, FanOutConfig{})
		rn.client = fake
		var mu sync.Mutex
		var warns, actives []slog.Record
		rn.logger = slog.New(recordFunc(func(r slog.Record) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.Level >= slog.LevelWarn:
				warns = append(warns, r)
			case strings.Contains(r.Message, "consumer active"):
				actives = append(actives, r)
			}
		}))
		if ok, err := rn.startFanOut(t.Context()); !ok || err != nil {
			t.Fatalf("startFanOut = %v, %v", ok, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(warns) != 1 || !strings.Contains(warns[0].Message, "still not ACTIVE") {
			t.Fatalf("warnings of a consumer CREATING for 90 s: %v, want one saying it is still not ACTIVE", warns)
		}
		attrs := map[string]string{}
		warns[0].Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if waited, err := time.ParseDuration(attrs["waited"]); attrs["status"] != "CREATING" || attrs["fix"] == "" || err != nil || waited < 30*time.Second || waited > 32*time.Second {
			t.Errorf("the warning's attributes %v, want status CREATING, waited about 30s and a fix", attrs)
		}
		if len(actives) != 1 {
			t.Errorf("%d lines say the consumer is active, want 1", len(actives))
		}
	})
}
