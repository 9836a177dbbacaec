package attempt

import (
	"context"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/weirstream/weir/clock"
)

// middlewareID names the middleware Middleware adds.
const middlewareID = "weir.AttemptTimeout"

// Middleware returns an AWS SDK stack option (for an operation's
// Options.APIOptions) that bounds each attempt of the operation, the SDK's
// retries each getting their own: an attempt with no answer d after it
// started is abandoned, and the SDK retries it as a transient error (its
// standard retryer retries errors that say so). d <= 0 adds nothing.
func Middleware(clk clock.Clock, d time.Duration) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		if d <= 0 {
			return nil
		}
		mw := middleware.FinalizeMiddlewareFunc(middlewareID, func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			actx, cancel := WithTimeout(ctx, clk, d)
			defer cancel()
			out, md, err := next.HandleFinalize(actx, in)
			if err != nil && TimedOut(actx) && ctx.Err() == nil {
				err = &timeoutError{after: d, msg: err.Error()}
			}
			return out, md, err
		})
		// After the retry middleware: once per attempt.
		if _, ok := s.Finalize.Get("Retry"); ok {
			return s.Finalize.Insert(mw, "Retry", middleware.After)
		}
		return s.Finalize.Add(mw, middleware.Before)
	}
}

// timeoutError is an attempt abandoned by Middleware. It keeps only the
// text of the SDK's error, which says the request was cancelled: the SDK
// never retries a cancelled request, and this one may be retried.
type timeoutError struct {
	after time.Duration
	msg   string
}

func (e *timeoutError) Error() string {
	return "no answer within " + e.after.String() + " (" + ErrTimeout.Error() + "): " + e.msg
}

// Unwrap returns ErrTimeout.
func (e *timeoutError) Unwrap() error { return ErrTimeout }

// RetryableError tells the SDK's retryer to retry the attempt.
func (e *timeoutError) RetryableError() bool { return true }

// Timeout reports that the error is a timeout.
func (e *timeoutError) Timeout() bool { return true }
