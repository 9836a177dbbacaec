package kinesis

import (
	"log/slog"

	"github.com/weirstream/weir/internal/streak"
)

// newStreak returns the streak watcher of one call of r (see package
// streak): a refused or broken connection is warned about at once.
// Throttling is left to the shard's throttling episode (see throttling).
func (r *retrier) newStreak(op, shard string, maxAttempts int) streak.Streak {
	return streak.Streak{
		Logger: r.logger, Clock: r.clock, Prefix: "kinesis", Service: "Kinesis",
		Op: op, Attr: slog.String("shard", shard), Endpoint: r.endpoint, MaxAttempts: maxAttempts,
		Fix:   func(cause, endpoint string) string { return streakFix(retryCause(cause), endpoint, r.setting) },
		Quiet: func(cause string) bool { return isThrottle(retryCause(cause)) }, // per episode: r.throttled
	}
}

// streakFix returns the likely fix for a streak of retries of cause, sent to
// endpoint, which setting sets (Config.Endpoint or the given Config.Client).
func streakFix(cause retryCause, endpoint, setting string) string {
	switch cause {
	case causeTransport:
		return "cannot connect to Kinesis at " + endpoint + ": check " + setting + ", the region (AWS_REGION), proxies and the network"
	case causeThrottled:
		return "the shard's read limits (5 calls/s, 2 MB/s) are shared by every consumer of the stream: fewer consumers, a longer Config.PollInterval or MinReadInterval, or more shards"
	case causeLimitExceeded:
		return "control-plane calls are limited per account and stream: fewer workers starting or listing shards at once"
	case causeKMSThrottling:
		return "the stream's KMS key is throttled: raise its KMS request quota"
	case causeServerError:
		return "Kinesis answers with server errors: usually transient; check the AWS Health Dashboard if it lasts"
	case causeTimeout:
		return "Kinesis at " + endpoint + " does not answer within Config.AttemptTimeout: check the network, proxies and the endpoint"
	case causeResourceInUse:
		return "another subscription of the same consumer keeps taking the shard over: give each application its own consumer (FanOutConfig.ConsumerName, by default Config.App), and share a stream's shards between workers with Config.Leases"
	case causeIdleSubscription:
		return "subscriptions to Kinesis at " + endpoint + " open but deliver no event within a minute: check proxies between the workers and Kinesis, which must pass HTTP/2 event streams through as they come"
	case causeEmptySubscription:
		return "subscriptions to Kinesis at " + endpoint + " end before their first event: the event streams are cut; check proxies and load balancers between the workers and Kinesis, which must pass HTTP/2 event streams through, and the network"
	case causeExpiredCredentials:
		return "the AWS credentials expired and refreshing them keeps failing: check the credential source (role, profile, environment)"
	}
	return "see the error"
}
