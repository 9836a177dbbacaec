package kinesis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/panics"
)

// retryCause names why a Kinesis call was retried; Stats.Retries counts
// retries by cause, under these names.
type retryCause string

// retryCauses are every retry cause, each in Stats.Retries from 0 so that
// a metric of it exists before its first retry.
var retryCauses = []retryCause{
	causeThrottled, causeLimitExceeded, causeKMSThrottling, causeServerError, causeTimeout,
	causeTransport, causeExpiredCredentials, causeExpiredIterator, causeResourceInUse,
	causeIdleSubscription, causeEmptySubscription,
}

// The retry causes.
const (
	// causeThrottled is a ProvisionedThroughputExceededException (the
	// shard's read limit, 5 calls/s and 2 MB/s shared by all consumers, was
	// reached), any other error code the AWS SDK counts as throttling, or an
	// HTTP 429 answer.
	causeThrottled retryCause = "throttled"
	// causeLimitExceeded is a LimitExceededException: a control-plane call
	// (ListShards, GetShardIterator) was throttled.
	causeLimitExceeded retryCause = "limit_exceeded"
	// causeKMSThrottling is a KMSThrottlingException on an encrypted stream.
	causeKMSThrottling retryCause = "kms_throttling"
	// causeServerError is an HTTP 5xx answer or an InternalFailureException.
	causeServerError retryCause = "server_error"
	// causeTimeout is an attempt that got no answer within
	// Config.AttemptTimeout, an HTTP 408 answer or a RequestTimeout error
	// code (the server or a proxy gave up waiting), or a network timeout.
	causeTimeout retryCause = "timeout"
	// causeTransport is a connection that failed or broke mid-answer.
	causeTransport retryCause = "transport"
	// causeExpiredCredentials is an ExpiredTokenException (or ExpiredToken,
	// RequestExpired): the credentials are refreshed before the retry.
	causeExpiredCredentials retryCause = "expired_credentials"
	// causeExpiredIterator is an ExpiredIteratorException: the reader got a
	// new iterator after the last sequence number it read.
	causeExpiredIterator retryCause = "expired_iterator"
)

// expiredCredentialCodes are the error codes of a request signed with
// temporary credentials that expired, or signed too long before it was
// sent: new credentials (or a new signature) heal them.
var expiredCredentialCodes = map[string]bool{
	"ExpiredTokenException": true,
	"ExpiredToken":          true,
	"RequestExpired":        true,
}

// sdkRetryables are the AWS SDK's own checks of a transient error
// (aws/retry.DefaultRetryables: cancellations are not retried; errors that
// say they are retryable, broken connections, HTTP 500/502/503/504, an
// unmodeled 429, RequestTimeout codes and throttling codes are), so that
// the receiver retries what the SDK's standard retryer would.
var sdkRetryables = retry.IsErrorRetryables(retry.DefaultRetryables)

// sdkThrottles is the SDK's check of a throttling error code.
var sdkThrottles = retry.IsErrorThrottles(retry.DefaultThrottles)

// classify returns the retry cause of err, or "" if err is not worth
// retrying: a request the service refused for a reason retrying cannot fix
// (see withFix). It classifies errors as the AWS SDK's standard retryer
// does, and also retries an HTTP 408, any 5xx, expired credentials, and
// every broken or silent connection. Typed AWS errors are matched with
// errors.As, never by text. A deadline counts as a timeout: callers check
// their own context before asking.
func classify(err error) retryCause {
	var (
		throttled *types.ProvisionedThroughputExceededException
		limit     *types.LimitExceededException
		kms       *types.KMSThrottlingException
		internal  *types.InternalFailureException
		expiredIt *types.ExpiredIteratorException
		status    interface{ HTTPStatusCode() int }
		api       smithy.APIError
	)
	code := ""
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	httpStatus := 0
	if errors.As(err, &status) {
		httpStatus = status.HTTPStatusCode()
	}
	switch {
	case err == nil, errors.Is(err, context.Canceled) && !errors.Is(err, attempt.ErrTimeout):
		return ""
	case errors.As(err, &expiredIt):
		return "" // the reader gets a new iterator: see readShard
	case errors.As(err, &throttled):
		return causeThrottled
	case errors.As(err, &limit):
		return causeLimitExceeded
	case errors.As(err, &kms):
		return causeKMSThrottling
	case errors.As(err, &internal):
		return causeServerError
	case sdkThrottles.IsErrorThrottle(err) == aws.TrueTernary, httpStatus == http.StatusTooManyRequests:
		return causeThrottled
	case expiredCredentialCodes[code]:
		return causeExpiredCredentials
	case errors.Is(err, attempt.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		httpStatus == http.StatusRequestTimeout, code == "RequestTimeout", code == "RequestTimeoutException":
		return causeTimeout
	case httpStatus >= 500:
		return causeServerError
	case isTransport(err):
		return causeTransport
	case httpStatus == 0 && isTimeout(err):
		return causeTimeout
	case sdkRetryables.IsErrorRetryable(err) == aws.TrueTernary:
		return causeTransport // e.g. a request the SDK found signed with a skewed clock
	}
	return ""
}

// isTransport reports whether err is a connection that failed or broke:
// the SDK's connection checks (reset, refused, dial, temporary), a request
// that could not be sent, or an answer cut short.
func isTransport(err error) bool {
	var (
		send  *smithyhttp.RequestSendError
		deser *smithy.DeserializationError
		dns   *net.DNSError
	)
	if errors.As(err, &dns) && dns.IsNotFound {
		return false // no such host: check the endpoint and region (see withFix)
	}
	if isTimeout(err) {
		return false
	}
	return retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary ||
		errors.As(err, &send) || errors.As(err, &deser) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// retrier runs Kinesis calls with back-off on retryable errors, counting
// every retry by cause, each attempt bounded by timeout.
type retrier struct {
	clock   clock.Clock
	base    time.Duration
	max     time.Duration
	timeout time.Duration // of one attempt; 0: none
	stats   *statsCollector
	logger  *slog.Logger
	// refresh, when set, drops cached credentials after an expired-token
	// answer, so that the retry signs with new ones.
	refresh func()
	// endpoint is the Kinesis endpoint for warnings (see endpointOf), ""
	// for the AWS configuration's; setting is where it is set, for the fix.
	endpoint, setting string
	// throttles are the shards' throttling episodes, warned about once
	// each rather than per call (see throttling).
	throttles throttling
}

// newRetrier returns the retrier of r's calls: back-off and attempt timeout
// from its Config, credentials refreshed through client when it is the
// SDK's.
func (r *Receiver) newRetrier(client Client, clk clock.Clock, logger *slog.Logger) *retrier {
	rt := &retrier{
		clock: clk, base: r.cfg.RetryBaseDelay, max: r.cfg.RetryMaxDelay, timeout: r.cfg.AttemptTimeout,
		stats: &r.stats, logger: logger, refresh: credentialRefresher(client), endpoint: endpointOf(r.cfg, client), setting: "Config.Endpoint",
	}
	if r.cfg.Client != nil {
		rt.setting = "the endpoint of Config.Client"
	}
	return rt
}

// do calls f until it succeeds, fails with an error that is not worth
// retrying (returned with the fix named, see withFix), maxAttempts attempts
// failed (0 means no limit), or ctx is done. Each attempt gets its own
// context, ended after r.timeout. op and shard are for logs.
func do[T any](ctx context.Context, r *retrier, maxAttempts int, op, shard string, f func(context.Context) (T, error)) (T, error) {
	b := backoff.Policy{Base: r.base, Max: r.max}.Start()
	st := r.newStreak(op, shard, maxAttempts)
	for n := 1; ; n++ {
		v, err := once(ctx, r, f)
		if err == nil {
			st.Ended(n)
			r.served(shard)
			return v, nil
		}
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		cause := classify(err)
		if cause == "" {
			return v, withFix(op, err)
		}
		if maxAttempts > 0 && n >= maxAttempts {
			return v, fmt.Errorf("%w (gave up after %d attempts; fix: %s)", err, n, st.FixFor(string(cause)))
		}
		r.stats.shardRetry(shard, cause)
		if isThrottle(cause) {
			r.throttled(op, shard, cause, err)
		}
		if cause == causeExpiredCredentials && r.refresh != nil {
			r.refresh()
		}
		delay := b.Next()
		st.Failed(n, string(cause), cause == causeTransport, err)
		log := r.logger.Debug
		if cause == causeTimeout || cause == causeExpiredCredentials {
			log = r.logger.Warn // rare, and worth seeing
		}
		log("kinesis: retrying", "op", op, "shard", shard, "cause", string(cause), "attempt", n, "delay", delay, "err", err)
		if err := clock.Sleep(ctx, r.clock, delay); err != nil {
			return v, err
		}
	}
}

// once runs f once, bounded by r.timeout. A panic in f (in Config.Client,
// a user's wrapper maybe, called from a goroutine of the receiver where
// nothing above could recover it) is returned as an error naming it, with
// its stack: not retried, as a bug is the same at every try.
func once[T any](ctx context.Context, r *retrier, f func(context.Context) (T, error)) (T, error) {
	actx, cancel := attempt.WithTimeout(ctx, r.clock, r.timeout)
	defer cancel()
	v, err := panics.Call1(func() (T, error) { return f(actx) })
	if err, ok := clientPanic(err); ok {
		return v, err
	}
	if err == nil && nilAnswer(v) {
		// A wrapper's bug: the reader would dereference it, in a
		// goroutine where nothing recovers.
		return v, fmt.Errorf("the Kinesis client answered with no output and no error: a Client must return one or the other")
	}
	return v, attempt.Error(actx, err, r.timeout)
}

// nilAnswer reports whether v, a client's answer, is a nil pointer.
func nilAnswer[T any](v T) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// clientPanic returns, for err a *panics.Error of a Kinesis client's call,
// the error that names it, and true.
func clientPanic(err error) (error, bool) {
	pe, ok := err.(*panics.Error)
	if !ok {
		return err, false
	}
	return fmt.Errorf("the Kinesis client panicked: %w, in %s\n%s", pe, pe.Site, pe.Stack), true
}
