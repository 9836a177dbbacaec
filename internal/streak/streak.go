// Package streak warns when one AWS call keeps failing: at once when the
// service cannot be reached, and then each time the run of failed attempts
// doubles, so that a retry loop is never silent and an outage logs a line
// now and then, not one per retry. The Kinesis receiver's calls and the
// lease table's start-up use it; the DynamoDB sink's writes in flight
// share one (Shared).
package streak

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/weirstream/weir/clock"
)

// WarnAt is the first number of consecutive failed attempts of one call
// that is logged at WARN; the next warnings come each time the streak
// doubles (5, 10, 20, 40...).
const WarnAt = 5

// Streak watches the consecutive failed attempts of one call (one
// operation, through one endpoint) and logs at WARN, with the numbers and
// the likely fix, when the call cannot get through: at once for a failure
// that says the service cannot be reached (Failed's urgent), whose retries
// would otherwise go on silently for as long as the back-off allows, and
// whenever the streak reaches WarnAt, 2*WarnAt, 4*WarnAt... attempts, for
// any cause. Set the fields, then call Failed and Ended from the retry
// loop; a Streak is used by one goroutine.
type Streak struct {
	Logger *slog.Logger
	Clock  clock.Clock
	// Prefix starts every message ("kinesis"); Service names what cannot
	// be reached ("Kinesis").
	Prefix, Service string
	// Op is the operation retried; Attr, when its key is set, is one more
	// attribute of every line, such as the shard or the table.
	Op   string
	Attr slog.Attr
	// Endpoint is the endpoint the calls go to; "" means the AWS default
	// for the region.
	Endpoint string
	// MaxAttempts bounds the attempts (0: none), for the message.
	MaxAttempts int
	// Fix returns the likely fix of a streak of failures of cause, given
	// the endpoint.
	Fix func(cause, endpoint string) string
	// Quiet, when set, names the causes whose failures are never warned
	// about here, because the caller reports them its own way (throttling,
	// normal when a reader catches up, over many calls): they count in the
	// attempts, and a failure of another cause after them warns as usual.
	Quiet func(cause string) bool

	start  time.Time // of the first failed attempt
	warned bool
	next   int // attempt count of the next streak warning
}

// Failed records that attempt (counted from 1) failed with err of cause
// and that the call is about to be retried. urgent says the failure shows
// the service cannot be reached (a refused or silent connection): the
// first one is logged at once.
func (s *Streak) Failed(attempt int, cause string, urgent bool, err error) {
	s.failed(s.Clock.Now(), attempt, cause, urgent, err).log(s.Logger)
}

// Ended records that the call succeeded at attempt; a streak that was
// warned about is reported over.
func (s *Streak) Ended(attempt int) {
	s.ended(s.Clock.Now(), attempt).log(s.Logger)
}

// warning is a line to log at WARN, or nothing when nil.
type warning struct {
	msg  string
	args []any
}

func (w *warning) log(l *slog.Logger) {
	if w != nil {
		l.Warn(w.msg, w.args...)
	}
}

// failed is Failed at now, returning what to log.
func (s *Streak) failed(now time.Time, attempt int, cause string, urgent bool, err error) *warning {
	if attempt == 1 {
		s.start = now
		s.next = WarnAt
	}
	if s.Quiet != nil && s.Quiet(cause) {
		return nil
	}
	if !(urgent && !s.warned) && attempt < s.next {
		return nil
	}
	for attempt >= s.next {
		s.next *= 2
	}
	s.warned = true
	limit := "until it succeeds"
	if s.MaxAttempts > 0 {
		limit = "up to " + strconv.Itoa(s.MaxAttempts) + " attempts, then failing"
	}
	msg := s.Prefix + ": " + s.Op + " keeps failing; still retrying " + limit
	if attempt < WarnAt {
		msg = s.Prefix + ": cannot reach " + s.Service + " (" + s.Op + "); retrying " + limit
	}
	args := append(s.args(), "endpoint", s.endpoint(), "cause", cause,
		"attempts", attempt, "for", now.Sub(s.start).Round(time.Millisecond),
		"err", err, "fix", s.Fix(cause, s.endpoint()))
	return &warning{msg, args}
}

// ended is Ended at now, returning what to log.
func (s *Streak) ended(now time.Time, attempt int) *warning {
	if !s.warned {
		return nil
	}
	args := append(s.args(), "endpoint", s.endpoint(), "failed_attempts", attempt-1,
		"for", now.Sub(s.start).Round(time.Millisecond))
	return &warning{s.Prefix + ": " + s.Op + " succeeded again after failed attempts", args}
}

// FixFor returns the likely fix of a streak of failures of cause, as the
// warnings name it: for the error of a call that gave up.
func (s *Streak) FixFor(cause string) string { return s.Fix(cause, s.endpoint()) }

// args returns the first attributes of every line: the operation and Attr.
func (s *Streak) args() []any {
	if s.Attr.Key == "" {
		return []any{"op", s.Op}
	}
	return []any{"op", s.Op, s.Attr}
}

func (s *Streak) endpoint() string {
	if s.Endpoint == "" {
		return "AWS default for the region"
	}
	return s.Endpoint
}

// Shared is one Streak for the retry loops of many calls in flight at once
// through one endpoint, such as a sink's writes: an outage fails them all,
// and warning once per call would log as many lines at each step as there
// are calls in flight. A Shared streak counts the failed attempts of all
// the calls since one last got through, and warns as a Streak does on that
// count: at once for the first urgent failure, then at WarnAt,
// 2*WarnAt... failed attempts in all; a call that gets through ends the
// streak, with one line if it was warned about. It is safe for concurrent
// use, and logs outside its lock.
type Shared struct {
	mu     sync.Mutex
	s      Streak
	failed int // attempts failed since a call last got through
}

// NewShared returns a Shared streak that logs as s, whose fields are set,
// would.
func NewShared(s Streak) *Shared { return &Shared{s: s} }

// Failed records that an attempt of one of the calls failed with err of
// cause and is about to be retried; urgent is as for Streak.Failed.
func (sh *Shared) Failed(cause string, urgent bool, err error) {
	now := sh.s.Clock.Now()
	sh.mu.Lock()
	sh.failed++
	w := sh.s.failed(now, sh.failed, cause, urgent, err)
	sh.mu.Unlock()
	w.log(sh.s.Logger)
}

// Succeeded records that a call got through: a streak warned about is
// reported over, and the next failure starts a new one.
func (sh *Shared) Succeeded() {
	now := sh.s.Clock.Now()
	sh.mu.Lock()
	if sh.failed == 0 {
		sh.mu.Unlock()
		return
	}
	w := sh.s.ended(now, sh.failed+1)
	sh.failed, sh.s.warned = 0, false
	sh.mu.Unlock()
	w.log(sh.s.Logger)
}
