package lease

import (
	"context"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/checkpoint/leasetable"
)

// fault is what faultDB does to one call.
type fault int

const (
	noFault    fault = iota
	failBefore       // the call fails unapplied
	loseAnswer       // the call is applied, but answers with an error (a timed-out attempt that landed)
)

// errInjected is the transient service error faultDB answers with.
var errInjected = &types.InternalServerError{Message: aws.String("injected")}

// faultDB wraps a DynamoDB client and fails the calls its rule picks. The
// rule sees the operation ("UpdateItem", "Scan" or "GetItem") and the
// update expression, and runs under the lock, so it may keep counts.
type faultDB struct {
	leasetable.DynamoDBAPI
	mu   sync.Mutex
	rule func(op, expr string) fault // nil: no faults
}

// setRule replaces the rule; nil ends the faults.
func (f *faultDB) setRule(rule func(op, expr string) fault) {
	f.mu.Lock()
	f.rule = rule
	f.mu.Unlock()
}

func (f *faultDB) fault(op, expr string) fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rule == nil {
		return noFault
	}
	return f.rule(op, expr)
}

func (f *faultDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	ft := f.fault("UpdateItem", aws.ToString(in.UpdateExpression))
	if ft == failBefore {
		return nil, errInjected
	}
	out, err := f.DynamoDBAPI.UpdateItem(ctx, in, o...)
	if ft == loseAnswer && err == nil {
		return nil, errInjected
	}
	return out, err
}

func (f *faultDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if f.fault("Scan", "") != noFault {
		return nil, errInjected
	}
	return f.DynamoDBAPI.Scan(ctx, in, o...)
}

func (f *faultDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if f.fault("GetItem", "") != noFault {
		return nil, errInjected
	}
	return f.DynamoDBAPI.GetItem(ctx, in, o...)
}

// times returns a rule that does ft to the next n UpdateItems whose
// expression match accepts, and nothing else.
func times(n int, ft fault, match func(expr string) bool) func(op, expr string) fault {
	return func(op, expr string) fault {
		if n > 0 && op == "UpdateItem" && match(expr) {
			n--
			return ft
		}
		return noFault
	}
}

// Matches of the update expressions of a renewal, a beat, a take and a
// steal notice, for times.
func isRenew(expr string) bool { return expr == "SET #counter = #counter + :one" }
func isBeat(expr string) bool  { return strings.HasPrefix(expr, "ADD #a0 :one") }
func isTake(expr string) bool  { return strings.Contains(expr, ":newowner") }
func isNote(expr string) bool  { return expr == "ADD #a0 :n" }
func isHandOff(expr string) bool {
	return expr == "SET #counter = #counter + :one REMOVE #ckptowner"
}

// heldByBoth returns the shards a holds that b trusts (Holds) too.
func heldByBoth(a, b *worker) []string {
	var both []string
	for _, s := range a.held() {
		if b.c.Holds(s) {
			both = append(both, s)
		}
	}
	return both
}
