package kinesis

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awskinesis "github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/panics"
)

// fanOut is the enhanced fan-out side of one Start: the consumer every
// shard reader subscribes through.
type fanOut struct {
	cfg         FanOutConfig
	client      FanOutClient
	consumerARN string
	// subscribe opens one subscription; tests replace it.
	subscribe func(ctx context.Context, in *awskinesis.SubscribeToShardInput) (eventStream, time.Time, error)
}

// eventStream is one subscription's events, as the SDK's
// *kinesis.SubscribeToShardEventStream gives them.
type eventStream interface {
	// Events returns the channel of events, closed when the subscription ends.
	Events() <-chan types.SubscribeToShardEventStream
	// Close ends the subscription.
	Close() error
	// Err returns why the subscription ended, nil when Kinesis ended it
	// normally.
	Err() error
}

// errNoEventStream is returned for a SubscribeToShard answer without an
// event stream, which the SDK never gives.
var errNoEventStream = errors.New("kinesis: SubscribeToShard returned no event stream")

// ownCodec gives one subscription an event-stream codec of its own. The
// SDK's default protocol keeps one codec for every event stream of a
// client, unsynchronized (aws/smithy-go#714): concurrent subscriptions of
// the shards race on it. A fresh protocol per call, the same the client
// was built with, has a fresh codec. A protocol other than the default is
// left alone.
func ownCodec(o *awskinesis.Options) {
	if _, ok := o.Protocol.(*awsjson.Protocol); ok {
		o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
	}
}

// subscribeWith returns fanOut.subscribe for client: the subscription,
// and the Date of Kinesis's answer (its response metadata), a time on
// Kinesis's clock, whole seconds rounded down, just after it resolved the
// starting position; for a refused subscription, the Date of the refusal
// (errorDate); the zero time if the answer has none.
func subscribeWith(client FanOutClient) func(context.Context, *awskinesis.SubscribeToShardInput) (eventStream, time.Time, error) {
	return func(ctx context.Context, in *awskinesis.SubscribeToShardInput) (eventStream, time.Time, error) {
		out, err := panics.Call1(func() (*awskinesis.SubscribeToShardOutput, error) {
			return client.SubscribeToShard(ctx, in, ownCodec)
		})
		if err, ok := clientPanic(err); ok { // as once does for the other calls
			return nil, time.Time{}, err
		}
		if err != nil {
			return nil, errorDate(err), err
		}
		if out.GetStream() == nil {
			return nil, time.Time{}, errNoEventStream
		}
		date, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
		return out.GetStream(), date, nil
	}
}

// startFanOut finds, registers or waits for the consumer of
// Config.FanOut, within FanOutConfig.RegisterTimeout, and readies rn's
// readers to subscribe through it. Without Config.FanOut it does nothing.
// It returns (false, nil) when Stop came first.
func (rn *run) startFanOut(ctx context.Context) (bool, error) {
	if rn.cfg.FanOut == nil {
		return true, nil
	}
	client, ok := rn.client.(FanOutClient)
	if !ok { // New refuses such a Config.Client; the default client is one
		return false, fmt.Errorf("kinesis: FanOut: client %T lacks the enhanced fan-out calls", rn.client)
	}
	fo := &fanOut{cfg: *rn.cfg.FanOut, client: client, subscribe: rn.cfg.FanOut.subscribe}
	if fo.subscribe == nil {
		fo.subscribe = subscribeWith(client)
	}
	ctx, cancel := rn.r.untilStop(ctx)
	defer cancel()
	arn, err := rn.consumer(ctx, fo)
	if err != nil {
		if rn.r.stopping() && ctx.Err() != nil {
			return false, nil
		}
		return false, err
	}
	fo.consumerARN = arn
	rn.fanOut = fo
	rn.logger = rn.logger.With("consumer", arn)
	return !rn.r.stopping(), nil
}

// consumer returns the ARN of the ACTIVE consumer to subscribe through:
// FanOutConfig.ConsumerARN once it is ACTIVE, or the stream's consumer
// named FanOutConfig.ConsumerName, registered if there is none.
func (rn *run) consumer(ctx context.Context, fo *fanOut) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, fo.cfg.RegisterTimeout)
	defer cancel()
	var in *awskinesis.DescribeStreamConsumerInput
	if fo.cfg.ConsumerARN != "" {
		in = &awskinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(fo.cfg.ConsumerARN)}
	} else {
		streamARN, err := rn.streamARN(ctx)
		if err != nil {
			return "", err
		}
		in = &awskinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(fo.cfg.ConsumerName)}
	}
	what := fo.cfg.ConsumerARN
	if what == "" {
		what = fo.cfg.ConsumerName
	}
	arn, err := rn.awaitConsumer(ctx, fo.client, in, fo.cfg.RegisterTimeout)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("not ACTIVE within FanOut.RegisterTimeout (%v): %w", fo.cfg.RegisterTimeout, err)
		}
		return "", fmt.Errorf("kinesis: enhanced fan-out consumer %q of stream %s: %w", what, rn.cfg.Stream, err)
	}
	return arn, nil
}

// consumerWarnAfter is how long the consumer may be seen not ACTIVE
// (CREATING, DELETING) before the wait is logged at WARN, once: a
// consumer is registered in seconds, and no shard is read meanwhile.
const consumerWarnAfter = 30 * time.Second

// awaitConsumer describes the consumer in names until it is ACTIVE,
// registering it whenever it does not exist (when in names it by stream and
// name), and waits between looks with back-off. A wait that lasts
// consumerWarnAfter is logged at WARN, with the status, the timeout
// (RegisterTimeout) that ends the wait and the fix.
func (rn *run) awaitConsumer(ctx context.Context, client FanOutClient, in *awskinesis.DescribeStreamConsumerInput, timeout time.Duration) (string, error) {
	wait := backoff.Policy{Base: rn.cfg.RetryBaseDelay, Max: rn.cfg.RetryMaxDelay}.Start()
	var since time.Time // when the consumer was first seen not ACTIVE
	warned := false
	for {
		out, err := do(ctx, rn.retry, rn.cfg.MaxAttempts, "DescribeStreamConsumer", "", func(ctx context.Context) (*awskinesis.DescribeStreamConsumerOutput, error) {
			return client.DescribeStreamConsumer(ctx, in)
		})
		var notFound *types.ResourceNotFoundException
		switch {
		case errors.As(err, &notFound) && in.ConsumerName != nil:
			if err := rn.registerConsumer(ctx, client, in); err != nil {
				return "", err
			}
			continue // describe it: registered now, by this worker or another
		case err != nil:
			return "", fmt.Errorf("describing it: %w", err)
		case out.ConsumerDescription == nil:
			return "", errors.New("DescribeStreamConsumer returned no description")
		}
		d := out.ConsumerDescription
		if d.ConsumerStatus == types.ConsumerStatusActive {
			args := []any{"consumer", aws.ToString(d.ConsumerARN), "name", aws.ToString(d.ConsumerName)}
			if warned {
				args = append(args, "waited", rn.clock.Now().Sub(since).Round(time.Second))
			}
			rn.logger.Info("kinesis: enhanced fan-out consumer active", args...)
			return aws.ToString(d.ConsumerARN), nil
		}
		// CREATING: registered, not ready yet. DELETING: being removed;
		// once it is gone, the next look registers it again.
		rn.logger.Debug("kinesis: waiting for the enhanced fan-out consumer", "consumer", aws.ToString(d.ConsumerARN), "status", string(d.ConsumerStatus))
		if since.IsZero() {
			since = rn.clock.Now()
		}
		if waited := rn.clock.Now().Sub(since); !warned && waited >= consumerWarnAfter {
			warned = true
			rn.logger.Warn("kinesis: the enhanced fan-out consumer is still not ACTIVE; no shard is read until it is",
				"consumer", aws.ToString(d.ConsumerARN), "status", string(d.ConsumerStatus), "waited", waited.Round(time.Second),
				"register_timeout", timeout,
				"fix", "a consumer being created is ACTIVE within seconds, one being deleted (an earlier run's FanOut.DeregisterOnStop, or by hand) is registered again once it is gone: "+
					"check its status with aws kinesis describe-stream-consumer; Start fails once FanOut.RegisterTimeout has passed, raise it if that is too soon")
		}
		if err := wait.Wait(ctx, rn.clock); err != nil {
			return "", fmt.Errorf("waiting for status %s to become ACTIVE: %w", d.ConsumerStatus, err)
		}
	}
}

// registerConsumer registers the consumer in names. A
// ResourceInUseException means it exists already (another worker
// registered it first): not an error.
func (rn *run) registerConsumer(ctx context.Context, client FanOutClient, in *awskinesis.DescribeStreamConsumerInput) error {
	reg := &awskinesis.RegisterStreamConsumerInput{StreamARN: in.StreamARN, ConsumerName: in.ConsumerName}
	out, err := do(ctx, rn.retry, rn.cfg.MaxAttempts, "RegisterStreamConsumer", "", func(ctx context.Context) (*awskinesis.RegisterStreamConsumerOutput, error) {
		return client.RegisterStreamConsumer(ctx, reg)
	})
	var inUse *types.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		rn.logger.Debug("kinesis: enhanced fan-out consumer registered meanwhile by another worker", "name", aws.ToString(in.ConsumerName))
		return nil
	case err != nil:
		return fmt.Errorf("registering it: %w", err)
	}
	if c := out.Consumer; c != nil {
		rn.logger.Info("kinesis: registered an enhanced fan-out consumer", "consumer", aws.ToString(c.ConsumerARN), "name", aws.ToString(c.ConsumerName))
	}
	return nil
}

// streamARN returns the stream's ARN, which RegisterStreamConsumer needs:
// Config.Stream when it is one, DescribeStreamSummary's answer otherwise.
func (rn *run) streamARN(ctx context.Context) (string, error) {
	if isARN(rn.cfg.Stream) {
		return rn.cfg.Stream, nil
	}
	stream := streamRef(rn.cfg.Stream)
	in := &awskinesis.DescribeStreamSummaryInput{StreamName: stream.name(), StreamARN: stream.arn()}
	out, err := do(ctx, rn.retry, rn.cfg.MaxAttempts, "DescribeStreamSummary", "", func(ctx context.Context) (*awskinesis.DescribeStreamSummaryOutput, error) {
		return rn.client.DescribeStreamSummary(ctx, in)
	})
	if err != nil {
		return "", fmt.Errorf("finding the stream's ARN: %w", err)
	}
	if out.StreamDescriptionSummary == nil || aws.ToString(out.StreamDescriptionSummary.StreamARN) == "" {
		return "", errors.New("finding the stream's ARN: DescribeStreamSummary returned none")
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN), nil
}

// stopFanOut deregisters the consumer when FanOutConfig.DeregisterOnStop
// asks for it, within RegisterTimeout even if ctx is done; a failure is
// logged (Start's result is about reading, and a consumer left behind is
// only a cost).
func (rn *run) stopFanOut(ctx context.Context) {
	fo := rn.fanOut
	if fo == nil || !fo.cfg.DeregisterOnStop {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fo.cfg.RegisterTimeout)
	defer cancel()
	in := &awskinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(fo.consumerARN)}
	_, err := do(ctx, rn.retry, rn.cfg.MaxAttempts, "DeregisterStreamConsumer", "", func(ctx context.Context) (*awskinesis.DeregisterStreamConsumerOutput, error) {
		return fo.client.DeregisterStreamConsumer(ctx, in)
	})
	var notFound *types.ResourceNotFoundException
	switch {
	case err == nil:
		rn.logger.Info("kinesis: deregistered the enhanced fan-out consumer (FanOut.DeregisterOnStop)")
	case errors.As(err, &notFound):
		rn.logger.Info("kinesis: the enhanced fan-out consumer was already deregistered")
	default:
		rn.logger.Error("kinesis: deregistering the enhanced fan-out consumer failed; it is left registered", "err", err)
	}
}

// errorDate returns the Date header of the HTTP answer err carries (a call
// Kinesis refused), the zero time if there is none (no answer, or none
// dated).
func errorDate(err error) time.Time {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil {
		return time.Time{}
	}
	date, perr := http.ParseTime(re.Response.Header.Get("Date"))
	if perr != nil {
		return time.Time{}
	}
	return date
}
