package kinesis

import (
	"strconv"
	"time"
)

// streakWarnAt is the first number of consecutive failed attempts of one
// call that is logged at WARN; the next warnings come each time the streak
// doubles (5, 10, 20, 40...), so a long outage logs a line now and then,
// not one per retry.
const streakWarnAt = 5

// streak watches the consecutive failed attempts of one call (one
// operation on one shard, through one endpoint) and logs at WARN, with the
// numbers and the likely fix, when the call cannot get through: at once
// for a failure to reach the endpoint, whose retries would otherwise go on
// silently for as long as the back-off allows, and whenever the streak
// reaches streakWarnAt, 2*streakWarnAt, 4*streakWarnAt... attempts, for any
// cause.
type streak struct {
	r           *retrier
	op, shard   string
	maxAttempts int
	start       time.Time // of the first failed attempt
	warned      bool
	next        int // attempt count of the next streak warning
}

// failed records that attempt failed with a retryable err of cause, and
// that the call is about to be retried.
func (s *streak) failed(attempt int, cause RetryCause, err error) {
	if attempt == 1 {
		s.start = s.r.clock.Now()
		s.next = streakWarnAt
	}
	transportNow := cause == CauseTransport && !s.warned
	if !transportNow && attempt < s.next {
		return
	}
	if attempt >= s.next {
		s.next *= 2
	}
	s.warned = true
	limit := "until it succeeds"
	if s.maxAttempts > 0 {
		limit = "up to " + strconv.Itoa(s.maxAttempts) + " attempts, then failing"
	}
	msg := "kinesis: " + s.op + " keeps failing; still retrying " + limit
	if attempt < streakWarnAt {
		msg = "kinesis: cannot reach Kinesis (" + s.op + "); retrying " + limit
	}
	s.r.logger.Warn(msg,
		"op", s.op, "shard", s.shard, "endpoint", s.endpoint(), "cause", string(cause),
		"attempts", attempt, "for", s.r.clock.Now().Sub(s.start).Round(time.Millisecond),
		"err", err, "fix", streakFix(cause, s.endpoint()))
}

// ended records that the call succeeded at attempt; a streak that was
// warned about is reported over.
func (s *streak) ended(attempt int) {
	if !s.warned {
		return
	}
	s.r.logger.Warn("kinesis: "+s.op+" succeeded again after failed attempts",
		"op", s.op, "shard", s.shard, "endpoint", s.endpoint(), "failed_attempts", attempt-1,
		"for", s.r.clock.Now().Sub(s.start).Round(time.Millisecond))
}

func (s *streak) endpoint() string {
	if s.r.endpoint == "" {
		return "AWS default for the region"
	}
	return s.r.endpoint
}

// streakFix returns the likely fix for a streak of retries of cause.
func streakFix(cause RetryCause, endpoint string) string {
	switch cause {
	case CauseTransport:
		return "cannot connect to Kinesis at " + endpoint + ": check Config.Endpoint, the region (AWS_REGION), proxies and the network"
	case CauseThrottled:
		return "the shard's read limits (5 calls/s, 2 MB/s) are shared by every consumer of the stream: fewer consumers, a longer Config.PollInterval or MinReadInterval, or more shards"
	case CauseLimitExceeded:
		return "control-plane calls are limited per account and stream: fewer workers starting or listing shards at once"
	case CauseKMSThrottling:
		return "the stream's KMS key is throttled: raise its KMS request quota"
	case CauseServerError:
		return "Kinesis answers with server errors: usually transient; check the AWS Health Dashboard if it lasts"
	case CauseTimeout:
		return "Kinesis at " + endpoint + " does not answer within Config.AttemptTimeout: check the network, proxies and the endpoint"
	case CauseExpiredCredentials:
		return "the AWS credentials expired and refreshing them keeps failing: check the credential source (role, profile, environment)"
	}
	return "see the error"
}
