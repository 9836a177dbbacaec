package dynamochunk

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/clock"
)

// statusDB is a DynamoDB whose table of key (log, seq) has status, and
// counts the DescribeTable calls. Only EnsureTable's reading of the status
// is tested with it (dynalite updates a table at once); the calls
// themselves are tested against dynalite.
type statusDB struct {
	status    types.TableStatus
	describes int
}

func (d *statusDB) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	panic("CreateTable of a table that exists")
}

func (d *statusDB) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	d.describes++
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName: in.TableName, TableStatus: d.status,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("log"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("seq"), KeyType: types.KeyTypeRange},
		},
	}}, nil
}

// TestEnsureTableUpdating checks, in virtual time, that a table being
// updated (its capacity or billing mode changed, an index built: minutes
// to an hour), which serves reads and writes meanwhile, is used at once
// rather than waited for until EnsureTable gives up on it.
func TestEnsureTableUpdating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := &statusDB{status: types.TableStatusUpdating}
		if err := EnsureTable(t.Context(), db, clock.Real{}, slog.Default(), "logs", "log", "seq", "recovery log table"); err != nil {
			t.Fatalf("EnsureTable of an UPDATING table: %v", err)
		}
		if db.describes != 1 {
			t.Errorf("%d DescribeTable calls, want 1", db.describes)
		}
	})
}

// TestEnsureTableStuck checks, in virtual time, that a table whose status
// no wait cures (its KMS key inaccessible, or archived for it) fails
// EnsureTable at once naming the status and the fix, not after two
// minutes of checks with "not active".
func TestEnsureTableStuck(t *testing.T) {
	for _, status := range []types.TableStatus{types.TableStatusInaccessibleEncryptionCredentials, types.TableStatusArchiving} {
		t.Run(string(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := &statusDB{status: status}
				err := EnsureTable(t.Context(), db, clock.Real{}, slog.Default(), "logs", "log", "seq", "recovery log table")
				if err == nil || !strings.Contains(err.Error(), string(status)) || !strings.Contains(err.Error(), "fix:") {
					t.Fatalf("EnsureTable of a %s table: %v, want an error naming the status and the fix", status, err)
				}
				if db.describes != 1 {
					t.Errorf("%d DescribeTable calls, want 1", db.describes)
				}
			})
		})
	}
}

// TestEnsureTableNeverActive checks, in virtual time, that a table that
// stays CREATING (a restore from a backup) fails EnsureTable after
// dynamotable.MaxWait with an error naming the table, its status and the
// fix, not a bare count of attempts, and that the wait is logged at WARN
// before that, naming them too.
func TestEnsureTableNeverActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		db := &statusDB{status: types.TableStatusCreating}
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour) // virtual: a bound, not a measure
		defer cancel()
		err := EnsureTable(ctx, db, clock.Real{}, slog.New(slog.NewTextHandler(&out, nil)), "logs", "log", "seq", "recovery log table")
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "logs") ||
			!strings.Contains(err.Error(), "CREATING") || !strings.Contains(err.Error(), "fix:") {
			t.Fatalf("EnsureTable of a table that stays CREATING: %v, want an error naming the table, its status and the fix", err)
		}
		warn := out.String()
		if !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "table=logs") ||
			!strings.Contains(warn, "status=CREATING") || !strings.Contains(warn, "fix=") {
			t.Errorf("log %q, want a WARN naming the table, its status and the fix", warn)
		}
	})
}

// TestAccessFix checks that only an access denied gets a fix, naming the
// call's action, the table and the policy.
func TestAccessFix(t *testing.T) {
	denied := &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem",
		Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not allowed", Fault: smithy.FaultClient}}
	err := AccessFix(denied, "tbl", "docs/iam/x.json")
	if !errors.Is(err, denied) || !strings.Contains(err.Error(), "fix: allow dynamodb:PutItem on table tbl to these credentials (docs/iam/x.json;") {
		t.Errorf("AccessFix(access denied) = %v, want it wrapped naming the action, the table and the policy", err)
	}
	other := &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "PutItem", Err: &types.ProvisionedThroughputExceededException{}}
	if err := AccessFix(other, "tbl", "docs/iam/x.json"); err != other {
		t.Errorf("AccessFix(throttled) = %v, want it as it is", err)
	}
	if err := AccessFix(nil, "tbl", "docs/iam/x.json"); err != nil {
		t.Errorf("AccessFix(nil) = %v", err)
	}
}
