package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/awsconf"
	"github.com/weirstream/weir/internal/awserr"
)

// Kinds of the Coordinator's periodic calls whose failures are tracked
// (callFailed): each is tried again at its next period, so an outage of
// the lease table fails each of them once per period.
const (
	callBeat  = "beat"
	callRenew = "lease renewal"
	callScan  = "lease scan"
	callBoard = "read of the beat board"
	callPeek  = "read of another worker's lease"
	callTake  = "lease take"
	callSync  = "shard sync"
)

// failStreak is a run of failures in a row of one kind of periodic call.
// A kind made for several leases at once (a renewal, a take, a read of
// another worker's lease) keeps which of them fail: another lease's call
// that succeeds meanwhile does not end the streak, only those that failed
// succeeding again do.
type failStreak struct {
	n       int                       // failures in a row
	since   time.Time                 // of the first
	cause   error                     // the last failure DynamoDB answered, else the first (see lossFix)
	failing map[string]subjectFailure // the subjects failing (a shard, or "" for one call per period)
}

// subjectFailure is the last failure of a subject of a failStreak, and its
// cause as failStreak.cause is the streak's.
type subjectFailure struct {
	at    time.Time
	cause error
}

// dropStale forgets the subjects of s whose last failure is older than
// stale at now: their call is no longer made (a lease lost or taken by
// another worker, a board this worker reads no more), so no success of it
// will come to end the streak.
func (s *failStreak) dropStale(now time.Time, stale time.Duration) {
	for subject, f := range s.failing {
		if now.Sub(f.at) > stale {
			delete(s.failing, subject)
		}
	}
}

// staleFailure is how long after its last failure a subject of a failure
// streak of kind what is no longer waited for to succeed (see dropStale):
// longer than a few periods of the kind's calls, and than a lease
// duration, so that a call failing at every period keeps its streak.
func (c *Coordinator) staleFailure(what string) time.Duration {
	period := c.cfg.TakeInterval
	switch what {
	case callBeat, callRenew:
		period = c.cfg.RenewInterval
	case callSync:
		period = c.cfg.ShardSyncInterval
	}
	return max(3*period, c.cfg.LeaseDuration)
}

// callFailed logs a failure of a periodic call of kind what, for subject
// (the shard of a per-lease call, "" for one made once per period), tried
// again at its next period: at WARN, with msg, args, err and the likely
// fix, for the first failure since the kind last succeeded, and at DEBUG
// for the later ones, so that an outage of the lease table (DynamoDB
// throttled or unreachable) logs one warning per kind of call, not one
// every period for as long as it lasts; callSucceeded says when it ends.
// It logs nothing once ctx is done (the worker stops).
func (c *Coordinator) callFailed(ctx context.Context, what, subject, msg string, err error, args ...any) {
	if ctx.Err() != nil {
		return
	}
	if tableGone(err) {
		c.tableDeleted(ctx, err)
		return
	}
	n, since := c.countFailure(what, subject, err)
	args = append(args, "err", err)
	if n > 1 {
		c.log.Debug(msg, append(args, "failures", n, "for", c.cfg.Clock.Now().Sub(since).Round(time.Millisecond))...)
		return
	}
	c.log.Warn(msg+" (logged once until it succeeds again)", append(args, "fix", c.callFix(ctx, err))...)
}

// tableGone reports whether err is DynamoDB answering that the lease
// table does not exist (ResourceNotFoundException; also while a table of
// that name is being created again, or restored). The table was there when
// Run started (Ensure), so it was deleted since.
func tableGone(err error) bool {
	var notFound *types.ResourceNotFoundException
	return errors.As(err, &notFound)
}

// tableDeleted ends Run with an error naming the lease table, gone since
// Run started (err says so), and the fix: nothing this worker does brings
// it back, and a table created again under its name holds none of the
// checkpoints.
func (c *Coordinator) tableDeleted(ctx context.Context, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.gone:
		return
	default:
	}
	c.goneErr = fmt.Errorf("leasetable: the lease table %s no longer exists at %s (deleted while this worker ran): "+
		"no lease can be renewed, taken or checkpointed, and its checkpoints are gone; "+
		"fix: restore the table from a backup under the same name before starting again, "+
		"or start again without it: a new table is created and the shards have no checkpoint (Config.InitialPosition): %w",
		c.table.name, awsconf.DynamoDBEndpoint(ctx, c.table.given), err)
	close(c.gone)
}

// countFailure counts a failure with err of a periodic call of kind what
// for subject (see callFailed), without logging it (the caller logs it its
// own way), and returns the failures in a row of the kind and when the
// first one was. A streak whose subjects all went stale (dropStale) is
// over: the failure starts a new one.
func (c *Coordinator) countFailure(what, subject string, err error) (n int, since time.Time) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.failing[what]
	if s != nil {
		s.dropStale(now, c.staleFailure(what))
		if len(s.failing) == 0 {
			s = nil
		}
	}
	if s == nil {
		s = &failStreak{since: now, failing: make(map[string]subjectFailure)}
		c.failing[what] = s
	}
	s.n++
	answered := errors.As(err, new(smithy.APIError))
	if s.cause == nil || answered {
		s.cause = err
	}
	f := s.failing[subject]
	f.at = now
	if f.cause == nil || answered {
		f.cause = err
	}
	s.failing[subject] = f
	return s.n, s.since
}

// lossFix returns the attributes of the warning of a lease lost because
// the calls of kind what for subject (see callFailed) failed for a lease
// duration, the last with err: err, the cause of the stall when it is not
// err, and the fix. A call made as the lease expires is cut short by the
// expiry (attempt.ErrTimeout) before DynamoDB answers it, whatever stalled
// the lease: the fix is then that of the cause, the last failure DynamoDB
// answered of the subject's calls (such as an IAM refusal), else of the
// kind's (another shard's), not the timeout's.
func (c *Coordinator) lossFix(ctx context.Context, what, subject string, err error) []any {
	var cause error
	if errors.Is(err, attempt.ErrTimeout) {
		c.mu.Lock()
		if s := c.failing[what]; s != nil {
			for _, e := range []error{s.failing[subject].cause, s.cause} {
				if e != nil && !errors.Is(e, attempt.ErrTimeout) {
					cause = e
					break
				}
			}
		}
		c.mu.Unlock()
	}
	if cause != nil {
		return []any{"err", err, "cause", cause, "fix", c.callFix(ctx, cause)}
	}
	return []any{"err", err, "fix", c.callFix(ctx, err)}
}

// callSucceeded records that a periodic call of kind what for subject
// (see callFailed) succeeded: a failure streak of the kind ends once none
// of the subjects that failed still does, said at INFO with how many calls
// failed and for how long.
func (c *Coordinator) callSucceeded(what, subject string) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	s := c.failing[what]
	if s != nil {
		delete(s.failing, subject)
		s.dropStale(now, c.staleFailure(what))
		if len(s.failing) > 0 {
			s = nil // others still fail
		} else {
			delete(c.failing, what)
		}
	}
	c.mu.Unlock()
	if s != nil {
		c.log.Info("leasetable: "+what+" succeeds again after failing", "failures", s.n,
			"for", now.Sub(s.since).Round(time.Millisecond))
	}
}

// callFix returns the likely fix of a lease-table call that failed with err.
func (c *Coordinator) callFix(ctx context.Context, err error) string {
	if errors.As(err, new(listError)) {
		return "the listing of the stream's shards (Kinesis ListShards) failed, not the lease table: the error names its fix " +
			"(a stream deleted or misnamed, kinesis:ListShards not allowed, Kinesis unreachable)"
	}
	switch {
	case awserr.DynamoDBThrottled(err):
		return "DynamoDB throttles the lease table " + c.table.name + ": switch it to on-demand capacity (PAY_PER_REQUEST, as weir creates it) or raise its provisioned capacity"
	case awserr.BadCredentials(err):
		return "the credentials are not valid for this account and region: check Leases.AWS (access key, secret, session token, region) or the client given as Leases.DynamoDB"
	case awserr.Refused(err):
		return "allow the actions of docs/iam/dynamodb-leases.json on table " + c.table.name + " to these credentials (and kinesis:ListShards on the stream, for a shard sync)"
	case errors.Is(err, attempt.ErrTimeout):
		return silentFix("timeout", awsconf.DynamoDBEndpoint(ctx, c.table.given))
	}
	return silentFix("error", awsconf.DynamoDBEndpoint(ctx, c.table.given))
}
