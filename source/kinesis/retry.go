package kinesis

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
)

// RetryCause names why a Kinesis call was retried; Stats.Retries counts
// retries by cause.
type RetryCause string

// The retry causes.
const (
	// CauseThrottled is a ProvisionedThroughputExceededException: the shard's
	// read limit (5 calls/s, 2 MB/s, shared by all consumers) was reached.
	CauseThrottled RetryCause = "throttled"
	// CauseLimitExceeded is a LimitExceededException: a control-plane call
	// (ListShards, GetShardIterator) was throttled.
	CauseLimitExceeded RetryCause = "limit_exceeded"
	// CauseKMSThrottling is a KMSThrottlingException on an encrypted stream.
	CauseKMSThrottling RetryCause = "kms_throttling"
	// CauseServerError is an HTTP 5xx answer or an InternalFailureException.
	CauseServerError RetryCause = "server_error"
	// CauseTransport is a connection that failed or broke mid-answer.
	CauseTransport RetryCause = "transport"
	// CauseExpiredIterator is an ExpiredIteratorException: the reader got a
	// new iterator after the last sequence number it read.
	CauseExpiredIterator RetryCause = "expired_iterator"
)

// classify returns the retry cause of err, or "" if err is not worth
// retrying. Typed AWS errors are matched with errors.As, never by text. A
// deadline counts as a transport error (an HTTP timeout): callers check
// their own context before asking.
func classify(err error) RetryCause {
	var (
		throttled *types.ProvisionedThroughputExceededException
		limit     *types.LimitExceededException
		kms       *types.KMSThrottlingException
		internal  *types.InternalFailureException
		resp      *smithyhttp.ResponseError
		send      *smithyhttp.RequestSendError
		deser     *smithy.DeserializationError
		netErr    net.Error
	)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return ""
	case errors.As(err, &throttled):
		return CauseThrottled
	case errors.As(err, &limit):
		return CauseLimitExceeded
	case errors.As(err, &kms):
		return CauseKMSThrottling
	case errors.As(err, &internal):
		return CauseServerError
	case errors.As(err, &resp) && resp.HTTPStatusCode() >= 500:
		return CauseServerError
	case errors.As(err, &send), errors.As(err, &deser), errors.As(err, &netErr),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return CauseTransport
	}
	return ""
}

// retrier runs Kinesis calls with back-off on retryable errors, counting
// every retry by cause.
type retrier struct {
	clock  clock.Clock
	base   time.Duration
	max    time.Duration
	stats  *statsCollector
	logger *slog.Logger
	// endpoint is the Kinesis endpoint for warnings: Config.Endpoint, ""
	// for the AWS configuration's.
	endpoint string
}

// do calls f until it succeeds, fails with an error that is not worth
// retrying, maxAttempts attempts failed (0 means no limit), or ctx is done.
// op and shard are for logs.
func do[T any](ctx context.Context, r *retrier, maxAttempts int, op, shard string, f func(context.Context) (T, error)) (T, error) {
	b := backoff.Policy{Base: r.base, Max: r.max}.Start()
	st := streak{r: r, op: op, shard: shard, maxAttempts: maxAttempts}
	for attempt := 1; ; attempt++ {
		v, err := f(ctx)
		if err == nil {
			st.ended(attempt)
			return v, nil
		}
		if ctx.Err() != nil {
			return v, ctx.Err()
		}
		cause := classify(err)
		if cause == "" || (maxAttempts > 0 && attempt >= maxAttempts) {
			return v, err
		}
		r.stats.shardRetry(shard, cause)
		delay := b.Next()
		st.failed(attempt, cause, err)
		r.logger.Debug("kinesis: retrying", "op", op, "shard", shard, "cause", string(cause), "attempt", attempt, "delay", delay, "err", err)
		if err := clock.Sleep(ctx, r.clock, delay); err != nil {
			return v, err
		}
	}
}
