package kinesis

import (
	"context"
	"fmt"
	"strings"
	"time"

	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Defaults of FanOutConfig.
const (
	// defaultRegisterTimeout bounds the registration of the stream
	// consumer, its wait until ACTIVE included, when
	// FanOutConfig.RegisterTimeout is zero; it also bounds the
	// de-registration of FanOutConfig.DeregisterOnStop.
	defaultRegisterTimeout = 2 * time.Minute

	// subscriptionLifetime is how long Kinesis serves one SubscribeToShard
	// subscription before it ends it: 5 minutes.
	subscriptionLifetime = 5 * time.Minute
	// lifetimeMargin is how long past subscriptionLifetime a reader waits
	// for Kinesis to end a subscription before it ends it itself.
	lifetimeMargin = 15 * time.Second
	// defaultIdleTimeout is how long a reader waits for an event before it
	// takes the connection for dead and subscribes again.
	defaultIdleTimeout = time.Minute
	// minSubscribeInterval is the least time between two SubscribeToShard
	// calls of one reader: Kinesis allows one call per second per consumer
	// and shard.
	minSubscribeInterval = time.Second
)

// FanOutClient is a Client that can also read with enhanced fan-out: the
// calls Config.FanOut makes. *kinesis.Client of aws-sdk-go-v2 implements it.
// SubscribeToShard needs HTTP/2 with Kinesis: the SDK's default HTTP client
// negotiates it; an HTTP client of your own must too.
type FanOutClient interface {
	Client
	// RegisterStreamConsumer registers the consumer when it does not exist.
	RegisterStreamConsumer(ctx context.Context, in *awskinesis.RegisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.RegisterStreamConsumerOutput, error)
	// DescribeStreamConsumer finds the consumer and tells its status.
	DescribeStreamConsumer(ctx context.Context, in *awskinesis.DescribeStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DescribeStreamConsumerOutput, error)
	// DeregisterStreamConsumer removes the consumer (FanOutConfig.DeregisterOnStop).
	DeregisterStreamConsumer(ctx context.Context, in *awskinesis.DeregisterStreamConsumerInput, optFns ...func(*awskinesis.Options)) (*awskinesis.DeregisterStreamConsumerOutput, error)
	// SubscribeToShard opens one shard's event stream for up to 5 minutes.
	SubscribeToShard(ctx context.Context, in *awskinesis.SubscribeToShardInput, optFns ...func(*awskinesis.Options)) (*awskinesis.SubscribeToShardOutput, error)
}

var _ FanOutClient = (*awskinesis.Client)(nil)

// FanOutConfig switches a Receiver from GetRecords polling to enhanced
// fan-out (Config.FanOut): every shard reader subscribes to its shard
// through a registered stream consumer (SubscribeToShard), and Kinesis
// pushes its records as they arrive, with up to 2 MB/s per shard for this
// consumer alone instead of a share of the 5 GetRecords calls/s every
// polling consumer of the stream divides.
//
// Everything else is as with polling: each event's records enter one block
// whole, with one range from their first to their last sequence number, so
// Recompute still reads a lost block back with GetRecords; KPL aggregates
// are de-aggregated; leases, checkpoints, the recovery log and the
// parent-before-child order of resharded shards work the same way.
//
// The consumer: the receiver finds the stream's consumer named
// ConsumerName, registers it (RegisterStreamConsumer) when there is none,
// and waits until it is ACTIVE, all within RegisterTimeout, before reading
// anything. Every worker of an application shares the one consumer (a
// stream has at most 20). The receiver never deregisters it unless
// DeregisterOnStop is set: a consumer costs money by the hour on AWS, but
// deregistering it would end the subscriptions of every other worker using
// it, so remove it yourself (DeregisterStreamConsumer) once the
// application is retired.
//
// A subscription lasts 5 minutes; the reader then subscribes again after
// the event's continuation sequence number, and does so too after a
// broken connection or a server error (backing off with jitter) and after
// a ResourceInUseException (Kinesis refuses a subscription of the same
// consumer and shard within 5 seconds of the previous one), at most once a
// second per shard. A shard's end comes as an event without a continuation
// sequence number, listing the child shards; the reader then stops as a
// polling one does at the end of its shard. As a safety net, a reader that
// is caught up on an idle shard checks at most every
// Config.ShardSyncInterval, with one GetShardIterator and one GetRecords
// call, whether the shard was closed and read to its end.
//
// In Stats, subscriptions retried are counted in Retries by cause
// ("resource_in_use" among them).
type FanOutConfig struct {
	// ConsumerName is the name of the stream consumer to use, registered
	// if it does not exist: 1 to 128 letters, digits, '_', '.' or '-'.
	// Default: Config.App.
	ConsumerName string
	// ConsumerARN, when set, is a consumer registered beforehand, for
	// example by infrastructure code, used as it is: the receiver only
	// waits until it is ACTIVE and never registers or deregisters it, so
	// ConsumerName must be left empty. It looks like
	// arn:aws:kinesis:REGION:ACCOUNT:stream/NAME/consumer/CONSUMER:TIMESTAMP,
	// NAME being Config.Stream's.
	// Default: "", find or register ConsumerName.
	ConsumerARN string
	// DeregisterOnStop deregisters the consumer when Start returns (after
	// Stop, a cancelled ctx or a failure), within RegisterTimeout; a
	// failure is logged. Only for an application run by one worker at a
	// time: the other workers' subscriptions would end. Not with
	// ConsumerARN. Default false: the consumer is kept.
	DeregisterOnStop bool
	// RegisterTimeout bounds finding or registering the consumer, its wait
	// until ACTIVE included; Start fails if it is not ACTIVE by then. It
	// also bounds DeregisterOnStop's call. Default 2m.
	RegisterTimeout time.Duration

	// lifetime is how long a reader keeps one subscription before it ends
	// it itself if Kinesis did not; 0 means subscriptionLifetime plus
	// lifetimeMargin. Tests shorten it.
	lifetime time.Duration
	// idleTimeout is how long a reader waits for an event before it
	// subscribes again; 0 means defaultIdleTimeout.
	idleTimeout time.Duration
	// minSubscribeInterval is the least time between two SubscribeToShard
	// calls of a reader; 0 means minSubscribeInterval. Tests lower it.
	minSubscribeInterval time.Duration
	// subscribe, when set, replaces the client's SubscribeToShard: unit
	// tests script event streams with it. It also returns the Date of
	// Kinesis's answer, the zero time if none (see subscribeWith).
	subscribe func(ctx context.Context, in *awskinesis.SubscribeToShardInput) (eventStream, time.Time, error)
}

// withDefaults returns a copy of f with its zero fields set; app is
// Config.App.
func (f FanOutConfig) withDefaults(app string) FanOutConfig {
	if f.ConsumerName == "" && f.ConsumerARN == "" {
		f.ConsumerName = app
	}
	if f.RegisterTimeout == 0 {
		f.RegisterTimeout = defaultRegisterTimeout
	}
	if f.lifetime == 0 {
		f.lifetime = subscriptionLifetime + lifetimeMargin
	}
	if f.idleTimeout == 0 {
		f.idleTimeout = defaultIdleTimeout
	}
	if f.minSubscribeInterval == 0 {
		f.minSubscribeInterval = minSubscribeInterval
	}
	return f
}

// problems reports what is wrong with f (after withDefaults) within c.
func (f FanOutConfig) problems(c Config) []error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if f.ConsumerARN != "" {
		if !isConsumerARN(f.ConsumerARN) {
			add("FanOut.ConsumerARN %q: must look like arn:aws:kinesis:REGION:ACCOUNT:stream/NAME/consumer/CONSUMER:TIMESTAMP, as RegisterStreamConsumer returns it", f.ConsumerARN)
		}
		if f.DeregisterOnStop {
			add("FanOut.DeregisterOnStop with FanOut.ConsumerARN: a consumer registered outside the receiver is never deregistered by it; unset one of them")
		}
		if f.ConsumerName != "" {
			add("FanOut.ConsumerName %q with FanOut.ConsumerARN: the receiver uses the consumer of the ARN and would ignore the name; unset one of them", f.ConsumerName)
		}
		// A consumer of another stream would serve that stream's shards of
		// the same IDs, recorded as this stream's ranges: Recompute would
		// then read other records back.
		if of, ok := consumerStream(f.ConsumerARN); ok && of != streamName(c.Stream) {
			add("FanOut.ConsumerARN %q: a consumer of stream %q, not of Config.Stream %q: give the ARN of a consumer registered on %[3]q", f.ConsumerARN, of, c.Stream)
		}
	} else if err := validateConsumerName(f.ConsumerName); err != nil {
		problems = append(problems, err)
	}
	if f.RegisterTimeout < 0 {
		add("FanOut.RegisterTimeout %v: must be > 0 (0 means %v)", f.RegisterTimeout, defaultRegisterTimeout)
	}
	if c.Client != nil {
		if _, ok := c.Client.(FanOutClient); !ok {
			add("FanOut with Client %T: the client lacks the enhanced fan-out calls (RegisterStreamConsumer, DescribeStreamConsumer, DeregisterStreamConsumer, SubscribeToShard); pass a kinesis.FanOutClient such as *kinesis.Client, or leave FanOut nil to poll", c.Client)
		}
	}
	return problems
}

// validateConsumerName checks a consumer name as Kinesis does: 1 to 128
// characters of [a-zA-Z0-9_.-].
func validateConsumerName(name string) error {
	if name == "" {
		return fmt.Errorf("FanOut.ConsumerName is empty: set it (or Config.App, its default) to the consumer's name")
	}
	if len(name) > 128 {
		return fmt.Errorf("FanOut.ConsumerName %q: a consumer name has at most 128 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return fmt.Errorf("FanOut.ConsumerName %q: a consumer name may hold only letters, digits, '_', '.' and '-' (it defaults to Config.App: set FanOut.ConsumerName)", name)
		}
	}
	return nil
}

// isConsumerARN reports whether s looks like a stream consumer's ARN.
func isConsumerARN(s string) bool {
	_, ok := consumerStream(s)
	return ok
}

// consumerStream returns the name of the stream of consumer ARN s, and
// whether s is one.
func consumerStream(s string) (string, bool) {
	stream, consumer, ok := strings.Cut(s, "/consumer/")
	if !ok || strings.Count(consumer, ":") != 1 || strings.HasPrefix(consumer, ":") || strings.HasSuffix(consumer, ":") {
		return "", false
	}
	return streamNameOfARN(stream)
}

// streamName returns the name of Config.Stream s, given as a name or an
// ARN.
func streamName(s string) string {
	if name, ok := streamNameOfARN(s); isARN(s) && ok {
		return name
	}
	return s
}
