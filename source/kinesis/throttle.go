package kinesis

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/weirstream/weir/internal/streak"
)

// throttleQuiet is how long a shard's calls must go unthrottled for its
// throttling episode to end (see throttling).
const throttleQuiet = time.Minute

// isThrottle reports whether cause is a call throttled by a limit of
// Kinesis or KMS: normal while a reader catches up, reported per episode
// (throttling) rather than per call.
func isThrottle(cause retryCause) bool {
	return cause == causeThrottled || cause == causeLimitExceeded || cause == causeKMSThrottling
}

// throttling tracks, per shard ("" for the calls on the stream), episodes
// of throttled calls. A reader that catches up on large records hits the
// shard's read limit (2 MB/s) on call after call, each throttled a few
// times and then served: warned about per call, it would log two lines
// every few seconds for as long as it catches up. An episode starts at a
// throttled call and ends once the shard's calls went unthrottled for
// throttleQuiet; it is warned about once, when it counts streak.WarnAt
// throttled calls (a throttle now and then is normal: the read limits are
// shared by every consumer), and its end is then logged at WARN with the
// count. It is safe for concurrent use.
type throttling struct {
	mu sync.Mutex
	on map[string]*episode
}

// episode is one shard's run of throttled calls.
type episode struct {
	start, last time.Time // the first and the latest throttled call
	count       int       // throttled calls
	warned      bool
	op, cause   string // of the latest throttled call
}

// throttled records that a call op of shard was throttled for cause (err),
// and warns when it makes the shard's episode worth a warning.
func (r *retrier) throttled(op, shard string, cause retryCause, err error) {
	now := r.clock.Now()
	t := &r.throttles
	t.mu.Lock()
	if t.on == nil {
		t.on = make(map[string]*episode)
	}
	ep := t.on[shard]
	var ended *episode
	if ep != nil && now.Sub(ep.last) >= throttleQuiet {
		ended, ep = ep, nil
	}
	if ep == nil {
		ep = &episode{start: now}
		t.on[shard] = ep
	}
	ep.count++
	ep.last, ep.op, ep.cause = now, op, string(cause)
	warn := !ep.warned && ep.count >= streak.WarnAt
	ep.warned = ep.warned || warn
	snapshot := *ep
	t.mu.Unlock()
	r.logEnd(shard, ended)
	if warn {
		r.logger.Warn("kinesis: calls throttled by Kinesis's limits; retrying with back-off, and counting the throttled calls until none comes for "+throttleQuiet.String(),
			"op", op, "shard", shard, "endpoint", r.endpointName(), "cause", string(cause), "throttled", snapshot.count,
			"for", now.Sub(snapshot.start).Round(time.Millisecond), "err", err, "fix", streakFix(cause, r.endpointName(), r.setting))
	}
}

// served records that a call of shard succeeded: the shard's episode ends
// if its last throttled call is throttleQuiet old.
func (r *retrier) served(shard string) {
	now := r.clock.Now()
	t := &r.throttles
	t.mu.Lock()
	ep := t.on[shard]
	if ep == nil || now.Sub(ep.last) < throttleQuiet {
		t.mu.Unlock()
		return
	}
	delete(t.on, shard)
	t.mu.Unlock()
	r.logEnd(shard, ep)
}

// stopThrottling ends the episode of shard, whose reader stopped.
func (r *retrier) stopThrottling(shard string) {
	t := &r.throttles
	t.mu.Lock()
	ep := t.on[shard]
	delete(t.on, shard)
	t.mu.Unlock()
	r.logEnd(shard, ep)
}

// stopAllThrottling ends every episode: the retrier's calls are over
// (Recompute returns).
func (r *retrier) stopAllThrottling() {
	t := &r.throttles
	t.mu.Lock()
	on := t.on
	t.on = nil
	t.mu.Unlock()
	for _, shard := range slices.Sorted(maps.Keys(on)) {
		r.logEnd(shard, on[shard])
	}
}

// logEnd logs the end of ep, an episode of shard (nil: none), if its
// start was warned about.
func (r *retrier) logEnd(shard string, ep *episode) {
	if ep == nil || !ep.warned {
		return
	}
	r.logger.Warn("kinesis: calls no longer throttled",
		slog.String("op", ep.op), slog.String("shard", shard), slog.String("endpoint", r.endpointName()),
		slog.String("cause", ep.cause), slog.Int("throttled", ep.count),
		slog.Duration("for", ep.last.Sub(ep.start).Round(time.Millisecond)))
}

// endpointName is the endpoint the retrier's calls go to, for logs.
func (r *retrier) endpointName() string {
	if r.endpoint == "" {
		return "AWS default for the region"
	}
	return r.endpoint
}
