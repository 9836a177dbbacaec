package lease

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/awserr"
	"github.com/weirstream/weir/internal/localaws"
)

// deniedDB refuses every write and read of the lease table for want of
// an IAM permission once deny is set; as the SDK, it fails a call whose
// ctx is done before sending it.
type deniedDB struct {
	leasetable.DynamoDBAPI
	mu     sync.Mutex
	denied bool
}

func (d *deniedDB) deny() { d.mu.Lock(); d.denied = true; d.mu.Unlock() }

func (d *deniedDB) refuse(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.denied {
		return nil
	}
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: &smithy.GenericAPIError{
		Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:" + op, Fault: smithy.FaultClient}}
}

func (d *deniedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := d.refuse(ctx, "UpdateItem"); err != nil {
		return nil, err
	}
	return d.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

func (d *deniedDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if err := d.refuse(ctx, "Scan"); err != nil {
		return nil, err
	}
	return d.DynamoDBAPI.Scan(ctx, in, o...)
}

func (d *deniedDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := d.refuse(ctx, "GetItem"); err != nil {
		return nil, err
	}
	return d.DynamoDBAPI.GetItem(ctx, in, o...)
}

// TestDeniedLeasesLostWarnNamesIAM checks that leases lost because the
// lease table's calls are refused for IAM are warned about, when they
// expire, with the IAM fix the stall's first warning gave. Before, the
// beat at the expiry was cut short by it (no call is sent on an expired
// lease), and the loss's WARN advised about timeouts and the endpoint.
func TestDeniedLeasesLostWarnNamesIAM(t *testing.T) {
	ctx := t.Context()
	logs := &recordLog{}
	db := &deniedDB{DynamoDBAPI: servers.Env(t).DynamoDB()}
	w := newWorker(t, localaws.UniqueName(t), "w", db, func(c *CoordinatorConfig) { c.Logger = slog.New(logs) })
	takeAll(t, w, shardIDs(2))
	from := logs.count()
	db.deny()
	for range 30 {
		if len(w.c.Held()) == 0 {
			break
		}
		w.clk.Advance(w.c.cfg.RenewInterval)
		w.cycle(ctx)
	}
	if n := len(w.c.Held()); n != 0 {
		t.Fatalf("%d leases held after their calls were refused for 30 periods, want none", n)
	}
	lost := 0
	for _, l := range logs.after(from, slog.LevelWarn) {
		if !strings.Contains(l.msg, "for a lease duration") {
			continue
		}
		lost++
		if !strings.Contains(l.fix, "docs/iam/dynamodb-leases.json") {
			t.Errorf("the loss's warning %q advises %q; want the IAM fix", l.msg, l.fix)
		}
	}
	if lost == 0 {
		t.Errorf("no warning of the leases lost: %v", logs.after(from, slog.LevelWarn))
	}
	if !awserr.AccessDenied(db.refuse(ctx, "UpdateItem")) {
		t.Error("deniedDB's refusal is not an AccessDenied")
	}
}

// TestLossFixIsTheShardsOwn checks that a lease lost as its renewal timed
// out is warned about with the fix of that lease's own last answered
// failure: refused for IAM (a policy on some items, dynamodb:LeadingKeys),
// while another lease's renewals are throttled. Before, the fix was that
// of the last answered failure of any lease's renewal: the throttling.
func TestLossFixIsTheShardsOwn(t *testing.T) {
	w := newWorker(t, localaws.UniqueName(t), "w", servers.Env(t).DynamoDB(), nil)
	apiErr := func(code string) error {
		return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem",
			Err: &smithy.GenericAPIError{Code: code, Message: code, Fault: smithy.FaultClient}}
	}
	denied, throttled := apiErr("AccessDeniedException"), apiErr("ThrottlingException")
	w.c.countFailure(callRenew, "shard-a", denied)
	w.c.countFailure(callRenew, "shard-b", throttled)
	attrs := w.c.lossFix(t.Context(), callRenew, "shard-a", fmt.Errorf("renew: %w", attempt.ErrTimeout))
	got := map[string]any{}
	for i := 0; i+1 < len(attrs); i += 2 {
		got[attrs[i].(string)] = attrs[i+1]
	}
	if got["cause"] != denied {
		t.Errorf("cause %v, want shard-a's own refusal %v", got["cause"], denied)
	}
	if fix, _ := got["fix"].(string); !strings.Contains(fix, "docs/iam/dynamodb-leases.json") {
		t.Errorf("fix %q, want the IAM fix", fix)
	}
	// A lease whose own calls DynamoDB never answered gets the kind's.
	attrs = w.c.lossFix(t.Context(), callRenew, "shard-c", fmt.Errorf("renew: %w", attempt.ErrTimeout))
	if len(attrs) < 4 || attrs[3] != throttled {
		t.Errorf("a lease without failures of its own: %v, want the last answered failure of the kind as cause", attrs)
	}
}
