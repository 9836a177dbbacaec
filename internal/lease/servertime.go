package lease

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/weirstream/weir/clock"
)

// serverTimeID names the middleware serverTime adds.
const serverTimeID = "weir.ServerTime"

// serverTime tells the time on AWS's clock, never later than it, from the
// Date header of the answers of the calls it watches (middleware). The pin
// of a lease at LATEST (Lease.LatestAt) is the one time of the lease
// protocol that another clock reads: Kinesis compares it with the arrival
// times it stamps records with, and refuses an AT_TIMESTAMP iterator at a
// time in its future; every other time is a duration on this worker's
// clock. A worker whose clock runs ahead of AWS's by more than LatestMargin
// would pin the shard in Kinesis's future, so the pin is taken from this
// time then (Coordinator.latestPin). It is safe for concurrent use.
type serverTime struct {
	clk clock.Clock

	mu    sync.Mutex
	off   time.Duration // AWS's clock minus clk, at least: see seen
	known bool
}

// middleware returns the AWS SDK stack option (for Options.APIOptions) that
// records the Date of each answer.
func (s *serverTime) middleware() func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc(serverTimeID, func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
			middleware.DeserializeOutput, middleware.Metadata, error,
		) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if resp, ok := out.RawResponse.(*smithyhttp.Response); ok {
				if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
					s.seen(date, s.clk.Now())
				}
			}
			return out, md, err
		}), middleware.After)
	}
}

// seen records an answer dated date (whole seconds, rounded down), received
// at local on this worker's clock. The server dated it before it sent it,
// so before local: AWS's clock read at least date at local, and date-local
// is a lower bound of the offset between the clocks, by up to a second
// (the Date's resolution) and the answer's transit. The latest answer's
// bound is kept, so that a step of this worker's clock is followed at the
// next answer.
func (s *serverTime) seen(date, local time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off, s.known = date.Sub(local), true
}

// offset returns what to add to this worker's clock to get the time on
// AWS's clock, as the latest answer tells it: at most a second or so
// early, never late unless this worker's clock stepped forward since that
// answer; false before any answer (a client that ignores per-call
// options).
func (s *serverTime) offset() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.off, s.known
}
