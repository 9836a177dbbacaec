package dynamolog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/dynamochunk"
	"github.com/weirstream/weir/recovery"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// keepClaims is how many of the latest claim items compaction keeps. A
// writer's claim is what fences off its predecessor, so it must outlive
// compaction; older claims only fence writers several generations stale.
const keepClaims = 16

// Append puts one item per record; see recovery.Log.Append.
func (l *dynamoLog) Append(ctx context.Context, records ...[]byte) error {
	enc, err := checkRecords(records)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(ctx); err != nil {
		return err
	}
	for _, p := range enc {
		seq, err := l.putEntry(ctx, p)
		if err != nil {
			return err
		}
		l.payloads, l.seqs = append(l.payloads, p), append(l.seqs, seq)
	}
	return nil
}

// putEntry puts an entry item at the next seq and returns the seq; see
// putNext.
func (l *dynamoLog) putEntry(ctx context.Context, payload []byte) (int64, error) {
	return l.putNext(ctx, map[string]types.AttributeValue{attrType: str(itemEntry), attrEntry: str(string(payload))})
}

// putNext puts an item at the next seq and returns the seq.
//
// A put whose outcome is unknown (no answer, a broken connection, server
// errors the client's own retries did not heal) is tried again until
// DynamoDB answers (see untilAnswered). The put is conditional on the seq
// being free, so the answer settles it: the item lands, or the seq is taken
// and reading the item back tells this writer's own earlier put (a success)
// from another writer's, which took the log over (fenced: the log is
// unusable, as it is when the put is refused for good or ctx ends first).
func (l *dynamoLog) putNext(ctx context.Context, attrs map[string]types.AttributeValue) (int64, error) {
	seq := l.next
	var mine bool
	err := l.untilAnswered(ctx, seq, func() (err error) {
		mine, err = l.putOrCheck(ctx, seq, attrs)
		return err
	})
	switch {
	case err != nil:
		return 0, l.unknown(seq, err)
	case !mine:
		l.failed = fmt.Errorf("%w: %s: item %d was written by another writer, which opened the log after this one; this one must stop: "+
			"a newer run of this worker took over (this one is a zombie), or another worker was given the same Name; "+
			"fix: if no newer run of this worker was started, give each worker a Name of its own (the two would fence each other at every restart)",
			recovery.ErrFenced, l.where(), seq)
		return 0, l.failed
	}
	l.next++
	return seq, nil
}

// untilAnswered calls try until DynamoDB answers it: until it succeeds, or
// fails in a way retrying cannot change (refused, or ctx done). Other
// failures leave the outcome unknown, or are throttling or a conflict with
// another writer of the item: try is called again with back-off, the first
// failure of the streak logged as a warning naming the log, table,
// endpoint and item (and the fix, for throttling and conflicts), and its
// end as information.
func (l *dynamoLog) untilAnswered(ctx context.Context, item any, try func() error) error {
	var streak *outage
	for {
		err := try()
		switch {
		case err == nil:
			streak.over(l, item)
			return nil
		case ctx.Err() != nil || awserr.Refused(err):
			return err
		}
		if streak == nil {
			streak = &outage{start: l.clock.Now(), wait: putWait.Start(), throttled: awserr.DynamoDBThrottled(err), conflict: awserr.DynamoDBConflict(err)}
			msg := "dynamolog: DynamoDB did not answer the recovery log; retrying until it does (appends wait meanwhile)"
			switch {
			case streak.throttled:
				msg = "dynamolog: DynamoDB is throttling the recovery log's table; retrying until it accepts (appends wait meanwhile): " +
					"raise the table's capacity or switch it to on-demand (for RequestLimitExceeded, the account's throughput quota)"
			case streak.conflict:
				msg = "dynamolog: another writer holds the recovery log's item; retrying until it lets go (appends wait meanwhile): " +
					"a TransactWriteItems of the log's items, or a write in another Region of a global table, has no business there: find that writer"
			}
			l.logger.Warn(msg, "log", l.where(), "table", l.table, "endpoint", l.endpoint, "item", item, "err", err)
		}
		if werr := streak.wait.Wait(ctx, l.clock); werr != nil {
			return errors.Join(werr, err)
		}
	}
}

// unknown makes the log unusable after a put of item seq whose outcome
// stays unknown, or that DynamoDB refused for good, and returns why.
func (l *dynamoLog) unknown(seq int64, err error) error {
	if awserr.Refused(err) {
		l.failed = fmt.Errorf("dynamolog: log %s: put of item %d refused by DynamoDB at %s: %w%s",
			l.where(), seq, l.endpoint, err, l.putFix(err))
		return l.failed
	}
	l.failed = fmt.Errorf("dynamolog: log %s: put of item %d failed and may or may not have "+
		"taken effect; close and reopen the log: %w", l.where(), seq, err)
	return l.failed
}

// putFix names, after "; fix: ", the fix of a put DynamoDB refused for
// good, or returns "" when there is nothing to say beyond the error.
func (l *dynamoLog) putFix(err error) string {
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return "; fix: the table " + l.table + " no longer exists (deleted while the log was open): restore it from a backup under the same name " +
			"before starting again, or start again without it: a new table is created, and the log starts empty (the pipeline starts afresh)"
	case awserr.AccessDenied(err):
		return "; fix: allow dynamodb:PutItem and dynamodb:GetItem on table " + l.table + " to these credentials (docs/iam/dynamodb-log.json)"
	case awserr.BadCredentials(err):
		return "; fix: the credentials are not valid for this account and region: check Config.AWS (access key, secret, session token, region)"
	}
	return ""
}

// putOrCheck puts attrs at seq on condition that the seq is free, and
// reports whether the item there is now this put's: the put landed, or an
// earlier put of the same item did (a retry after a lost answer).
func (l *dynamoLog) putOrCheck(ctx context.Context, seq int64, attrs map[string]types.AttributeValue) (bool, error) {
	err := l.put(ctx, attrs)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return l.isMine(ctx, seq, attrs)
	}
	return err == nil, err
}

// outage is a streak of puts of one item that got no definite answer, or
// were throttled, or rejected in conflict with another writer of the item.
type outage struct {
	start     time.Time
	wait      *backoff.Backoff
	throttled bool // the streak's first failure was throttling
	conflict  bool // or a conflict with another writer of the item
}

// over logs the end of the streak, if there is one.
func (o *outage) over(l *dynamoLog, item any) {
	if o == nil {
		return
	}
	msg := "dynamolog: DynamoDB answers again; the recovery log goes on"
	switch {
	case o.throttled:
		msg = "dynamolog: DynamoDB no longer throttles the recovery log; it goes on"
	case o.conflict:
		msg = "dynamolog: the recovery log's item is free again; the log goes on"
	}
	l.logger.Info(msg,
		"log", l.where(), "table", l.table, "endpoint", l.endpoint, "item", item,
		"retries", o.wait.Attempts(), "outage", l.clock.Now().Sub(o.start))
}

// isMine reports whether the item at seq is the one attrs describes, put by
// this writer.
func (l *dynamoLog) isMine(ctx context.Context, seq int64, attrs map[string]types.AttributeValue) (bool, error) {
	out, err := l.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(l.table),
		Key:            l.key(seq),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, err
	}
	for _, a := range []string{attrWriter, attrType, attrEntry, attrBase} {
		if !sameAttr(out.Item[a], attrs[a]) {
			return false, nil
		}
	}
	return true, nil
}

func sameAttr(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && a.Value == b.Value
	}
	return false
}

func (l *dynamoLog) key(seq int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrLog: str(l.name), attrSeq: num(seq)}
}

// checkRecords returns copies of records, refusing them all if one is
// empty or longer than MaxEntrySize (recovery.ErrEntryTooLarge).
func checkRecords(records [][]byte) ([][]byte, error) {
	out := make([][]byte, len(records))
	for i, r := range records {
		switch {
		case len(r) == 0:
			return nil, fmt.Errorf("dynamolog: record %d is empty", i)
		case len(r) > MaxEntrySize:
			return nil, fmt.Errorf("%w: record %d is %d bytes, more than the %d a DynamoDB log stores in one item",
				recovery.ErrEntryTooLarge, i, len(r), MaxEntrySize)
		}
		out[i] = slices.Clone(r)
	}
	return out, nil
}

// Read returns the records in effect; see recovery.Log.Read and Config.
func (l *dynamoLog) Read(ctx context.Context) ([][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	out := make([][]byte, len(l.payloads))
	for i, p := range l.payloads {
		out[i] = slices.Clone(p)
	}
	return out, nil
}

// Replace puts the records and a base item after them, then deletes the
// items they supersede; see recovery.Log.Replace and Config.
func (l *dynamoLog) Replace(ctx context.Context, records [][]byte) error {
	enc, err := checkRecords(records)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(ctx); err != nil {
		return err
	}
	old := l.payloads
	base := l.next
	var seqs []int64
	for _, p := range enc {
		seq, err := l.putEntry(ctx, p)
		if err != nil {
			return err
		}
		seqs = append(seqs, seq)
	}
	baseSeq, err := l.putNext(ctx, map[string]types.AttributeValue{attrType: str(itemBase), attrBase: num(base)})
	if err != nil {
		return err
	}
	// The copies are in effect: what follows only tidies up.
	l.stale = append(l.stale, l.seqs...)
	if l.base != 0 {
		l.stale = append(l.stale, l.base)
	}
	if n := len(l.claims) - keepClaims; n > 0 {
		l.stale, l.claims = append(l.stale, l.claims[:n]...), slices.Clone(l.claims[n:])
	}
	l.payloads, l.seqs, l.base = enc, seqs, baseSeq
	l.stale = l.deleteItems(ctx, l.stale)
	l.noteSnapshots(old)
	return nil
}

// deleteItems deletes the items at seqs, 25 to a request, and returns the
// seqs it could not delete, logging why; they are superseded, so deleting
// them can wait for the next compaction.
func (l *dynamoLog) deleteItems(ctx context.Context, seqs []int64) []int64 {
	for len(seqs) > 0 {
		n := min(len(seqs), 25)
		if err := l.deleteBatch(ctx, seqs[:n]); err != nil {
			l.logger.Warn("dynamolog: could not delete superseded log items; the next compaction will retry",
				"log", l.where(), "items", len(seqs), "err", err)
			return seqs
		}
		seqs = seqs[n:]
	}
	return nil
}

// deleteBatch deletes up to 25 items, retrying the unprocessed ones with
// back-off.
func (l *dynamoLog) deleteBatch(ctx context.Context, seqs []int64) error {
	keys := make([]map[string]types.AttributeValue, len(seqs))
	for i, seq := range seqs {
		keys[i] = l.key(seq)
	}
	return dynamochunk.DeleteKeys(ctx, l.client, l.clock, l.table, keys)
}

// The waits of the retry loops: for a new table to become active (fast at
// first: a local server or a new table on AWS is ready within tens of
// milliseconds to seconds); BatchWriteItem's are dynamochunk's.
var (
	// putWait paces the retries of a put of unknown outcome (after the
	// client's own retries): up to 5 s apart, so an outage of any length
	// costs DynamoDB little and the log goes on within seconds of its end.
	putWait = backoff.Policy{Base: 200 * time.Millisecond, Max: 5 * time.Second}
)

// Close marks the log closed; see recovery.Log.Close. The client is the caller's and
// stays open.
func (l *dynamoLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.payloads = nil
	return nil
}

// ensureTable creates the table if it does not exist, waits until it is
// active, and checks its key. A call that fails in a way a retry may heal
// (no answer, a cut connection, a server error, throttling) is tried again
// until DynamoDB answers, as every other call of the log is (see
// untilAnswered); one DynamoDB refuses for good fails it, naming the table
// and the fix.
func (l *dynamoLog) ensureTable(ctx context.Context) error {
	var verdict error // on the table itself (its key, its status) or ctx: no retry changes it
	err := l.untilAnswered(ctx, "table", func() error {
		err := dynamochunk.EnsureTable(ctx, l.client, l.clock, l.logger, l.table, attrLog, attrSeq, "recovery log table")
		var call *smithy.OperationError
		if err != nil && !errors.As(err, &call) {
			verdict = err
			return nil
		}
		return err
	})
	switch {
	case errors.Is(verdict, dynamochunk.ErrTableKey):
		return fmt.Errorf("%w: %w", recovery.ErrInvalidConfig, verdict)
	case verdict != nil:
		return fmt.Errorf("dynamolog: %w", verdict)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("dynamolog: recovery log table %s: %w", l.table, err)
	case err != nil:
		return fmt.Errorf("dynamolog: recovery log table %s at %s: %w; fix: %s", l.table, l.endpoint, err, l.tableFix(err))
	}
	return nil
}

// tableFix names the fix of a call on the table DynamoDB refused for good.
func (l *dynamoLog) tableFix(err error) string {
	switch {
	case awserr.AccessDenied(err):
		return "allow dynamodb:DescribeTable on table " + l.table + " to these credentials (docs/iam/dynamodb-log.json), " +
			"and dynamodb:CreateTable if weir is to create it (docs/iam/provisioning.json)"
	case awserr.BadCredentials(err):
		return "the credentials are not valid for this account and region: check Config.AWS (access key, secret, session token, region)"
	}
	return "check Config.Table, the region (AWS_REGION) and Endpoint"
}

// usable returns why the log cannot be used now, or nil; l.mu is held.
func (l *dynamoLog) usable(ctx context.Context) error {
	switch {
	case l.closed:
		return recovery.ErrClosed
	case l.failed != nil:
		return l.failed
	}
	return ctx.Err()
}
