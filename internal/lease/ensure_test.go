package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/dynamotable"
)

// creatingDB is a DynamoDB that creates a table which stays CREATING for
// the first `creating` DescribeTable calls after it, and records when each
// DescribeTable came. Only Ensure's pacing is tested with it; the calls
// themselves are tested against dynalite.
type creatingDB struct {
	leasetable.DynamoDBAPI // nil: any other call panics
	creating               int

	mu        sync.Mutex
	created   bool
	describes []time.Time
}

func (d *creatingDB) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.created = true
	return &dynamodb.CreateTableOutput{}, nil
}

func (d *creatingDB) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.created {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no table")}
	}
	d.describes = append(d.describes, time.Now())
	status := types.TableStatusActive
	if len(d.describes) <= d.creating {
		status = types.TableStatusCreating
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName: in.TableName, TableStatus: status,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
	}}, nil
}

// TestEnsureBacksOffFast checks, in virtual time, that Ensure checks a
// table it created again after tens of milliseconds, not a whole poll
// interval, and that its waits then double up to PollInterval: a cold
// start on a local server waits little, and DynamoDB's seconds cost a few
// checks.
func TestEnsureBacksOffFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := &creatingDB{creating: 8}
		tbl, err := NewTable(TableConfig{Name: "leases", Client: db, PollInterval: 400 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := tbl.Ensure(t.Context()); err != nil {
			t.Fatal(err)
		}
		d := db.describes
		if len(d) != 9 {
			t.Fatalf("%d DescribeTable calls after the table was created, want 9", len(d))
		}
		// The n-th wait (from 0) is in [w/2, w], w = min(25ms*2^n, 400ms).
		for i := 1; i < len(d); i++ {
			w := min(firstPoll<<(i-1), 400*time.Millisecond)
			if got := d[i].Sub(d[i-1]); got < w/2 || got > w {
				t.Errorf("wait %d: %v, want %v to %v", i, got, w/2, w)
			}
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Ensure took %v for 8 CREATING answers, want under 2s", took)
		}
	})
}

// silentThenActiveDB answers its first `silent` DescribeTable calls with
// fail, or as attempts that timed out would if fail is nil, then with an
// ACTIVE lease table.
type silentThenActiveDB struct {
	creatingDB
	silent int
	fail   error
	calls  int
}

func (d *silentThenActiveDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if d.calls++; d.calls <= d.silent {
		if d.fail != nil {
			return nil, d.fail
		}
		return nil, fmt.Errorf("operation error DynamoDB: DescribeTable: %w", attempt.ErrTimeout)
	}
	d.created = true
	return d.creatingDB.DescribeTable(ctx, in, opts...)
}

// TestEnsureSaysWhenDynamoDBAnswersAgain checks that Ensure warns at the
// first unanswered call and at the fifth, keeps asking below the limit,
// says when DynamoDB answers again, and then succeeds.
func TestEnsureSaysWhenDynamoDBAnswersAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuf
		db := &silentThenActiveDB{silent: ensureMaxUnanswered - 1}
		tbl := newTable(TableConfig{Name: "leases", Client: db}, slog.New(slog.NewJSONHandler(&out, nil)))
		if err := tbl.Ensure(t.Context()); err != nil {
			t.Fatalf("Ensure after %d unanswered calls: %v", db.silent, err)
		}
		var got []string
		for _, r := range jsonRecords(t, &out) {
			got = append(got, fmt.Sprint(r["attempts"], "/", r["failed_attempts"]))
		}
		want := []string{"1/<nil>", "5/<nil>", "<nil>/9"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("warnings attempts/failed_attempts (-want +got):\n%s", diff)
		}
	})
}

// TestEnsureRidesOutAnUnreachableDynamoDB checks that a DynamoDB that
// refuses connections at start-up (restarting, or briefly out of reach) is
// warned about at once and asked again, within the same bound as one that
// does not answer, while a request DynamoDB refuses for good (access
// denied) fails Ensure at once.
func TestEnsureRidesOutAnUnreachableDynamoDB(t *testing.T) {
	refusedConn := fmt.Errorf("operation error DynamoDB: DescribeTable: request send failed: %w",
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	denied := fmt.Errorf("operation error DynamoDB: DescribeTable: %w",
		&smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not allowed", Fault: smithy.FaultClient})
	for _, tc := range []struct {
		name     string
		fail     error
		silent   int
		wantErr  bool
		warnings int
	}{
		{"refused, then up", refusedConn, ensureMaxUnanswered - 1, false, 3},
		{"refused for good", refusedConn, 1000, true, 2},
		{"access denied", denied, 1000, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out syncBuf
				db := &silentThenActiveDB{silent: tc.silent, fail: tc.fail}
				tbl := newTable(TableConfig{Name: "leases", Client: db}, slog.New(slog.NewJSONHandler(&out, nil)))
				err := tbl.Ensure(t.Context())
				if (err != nil) != tc.wantErr {
					t.Fatalf("Ensure: %v, want an error: %v", err, tc.wantErr)
				}
				if tc.fail == denied && db.calls != 1 {
					t.Errorf("%d DescribeTable calls for access denied, want 1", db.calls)
				}
				if tc.fail == refusedConn && tc.wantErr && db.calls != ensureMaxUnanswered {
					t.Errorf("%d DescribeTable calls before giving up, want %d", db.calls, ensureMaxUnanswered)
				}
				if got := len(jsonRecords(t, &out)); got != tc.warnings {
					t.Errorf("%d log lines, want %d:\n%s", got, tc.warnings, out.tail(20))
				}
			})
		})
	}
}

// updatingDB is a DynamoDB whose lease table has status (UPDATING: its
// capacity or billing mode being changed, an index being built), and
// counts the DescribeTable calls. dynalite updates a table at once, and
// has no KMS keys to lose, so only Ensure's reading of the status is
// tested with it.
type updatingDB struct {
	leasetable.DynamoDBAPI // nil: any other call panics
	status                 types.TableStatus
	describes              int
}

func (d *updatingDB) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	d.describes++
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName: in.TableName, TableStatus: d.status,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
	}}, nil
}

// TestEnsureTableUpdating checks, in virtual time, that an UPDATING table,
// which serves reads and writes, is used at once: an update can last an
// hour, and a worker started meanwhile must not wait for its end.
func TestEnsureTableUpdating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := &updatingDB{status: types.TableStatusUpdating}
		tbl, err := NewTable(TableConfig{Name: "leases", Client: db})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour) // virtual: a bound, not a measure
		defer cancel()
		if err := tbl.Ensure(ctx); err != nil {
			t.Fatalf("Ensure of an UPDATING table: %v", err)
		}
		if db.describes != 1 {
			t.Errorf("%d DescribeTable calls, want 1", db.describes)
		}
	})
}

// TestEnsureTableStuck checks, in virtual time, that a table whose status
// no wait cures (its KMS key inaccessible, or archived for it) fails
// Ensure at once naming the status and the fix, rather than being waited
// for, silently, for ever.
func TestEnsureTableStuck(t *testing.T) {
	for _, status := range []types.TableStatus{types.TableStatusInaccessibleEncryptionCredentials, types.TableStatusArchived} {
		t.Run(string(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := &updatingDB{status: status}
				tbl, err := NewTable(TableConfig{Name: "leases", Client: db})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour) // virtual: a bound, not a measure
				defer cancel()
				err = tbl.Ensure(ctx)
				if err == nil || !strings.Contains(err.Error(), string(status)) || !strings.Contains(err.Error(), "fix:") || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Ensure of a %s table: %v, want an error naming the status and the fix", status, err)
				}
				if db.describes != 1 {
					t.Errorf("%d DescribeTable calls, want 1", db.describes)
				}
			})
		})
	}
}

// TestEnsureTableNeverUsable checks, in virtual time, that a lease table
// that stays CREATING (a restore from a backup), or of a status weir does
// not know, is not waited for silently for ever: the wait is logged at
// WARN naming the table, its status and the fix (after
// dynamotable.WarnAfter for CREATING, at once for an unknown status), and
// Ensure gives up after dynamotable.MaxWait with an error naming them too.
func TestEnsureTableNeverUsable(t *testing.T) {
	for _, tc := range []struct {
		status    types.TableStatus
		warnFirst bool // warned at the first check
	}{
		{types.TableStatusCreating, false},
		{"MIGRATING", true},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out syncBuf
				db := &updatingDB{status: tc.status}
				tbl := newTable(TableConfig{Name: "leases", Client: db}, slog.New(slog.NewJSONHandler(&out, nil)))
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour) // virtual: a bound, not a measure
				defer cancel()
				start := time.Now()
				err := tbl.Ensure(ctx)
				if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "leases") ||
					!strings.Contains(err.Error(), string(tc.status)) || !strings.Contains(err.Error(), "fix:") {
					t.Fatalf("Ensure of a table that stays %s: %v, want an error naming the table, the status and the fix", tc.status, err)
				}
				if took := time.Since(start); took < dynamotable.MaxWait || took > dynamotable.MaxWait+2*DefaultPollInterval {
					t.Errorf("Ensure gave up after %v, want %v", took, dynamotable.MaxWait)
				}
				recs := jsonRecords(t, &out)
				if len(recs) != 1 || recs[0]["level"] != "WARN" || recs[0]["table"] != "leases" ||
					recs[0]["status"] != string(tc.status) || recs[0]["fix"] == nil {
					t.Fatalf("log, want one WARN naming the table, its status and the fix:\n%s", out.tail(20))
				}
				warnedAt := time.Duration(recs[0]["waited"].(float64)) // slog's JSON: nanoseconds
				if tc.warnFirst != (warnedAt == 0) {
					t.Errorf("warned after %v of waiting, want at once: %v", warnedAt, tc.warnFirst)
				}
			})
		})
	}
}

// createFailsDB is a creatingDB whose first `fail` CreateTable calls fail
// with err, reaching no table.
type createFailsDB struct {
	creatingDB
	fail    int
	err     error
	creates int
}

func (d *createFailsDB) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if d.creates++; d.creates <= d.fail {
		return nil, d.err
	}
	return d.creatingDB.CreateTable(ctx, in, opts...)
}

// TestEnsureRidesOutAFailedCreateTable checks that a CreateTable of the
// lease table that fails in a way a retry may heal (a server error after
// the client's own retries, a cut connection) is warned about and tried
// again, within the bound of the DescribeTable calls before it, rather
// than failing the worker's start at once; and that one DynamoDB refuses
// for good (access denied) still fails Ensure at once.
func TestEnsureRidesOutAFailedCreateTable(t *testing.T) {
	serverErr := fmt.Errorf("operation error DynamoDB: CreateTable: %w",
		&smithy.GenericAPIError{Code: "InternalServerError", Message: "internal failure", Fault: smithy.FaultServer})
	denied := fmt.Errorf("operation error DynamoDB: CreateTable: %w",
		&smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not allowed", Fault: smithy.FaultClient})
	for _, tc := range []struct {
		name    string
		err     error
		fail    int
		wantErr bool
		creates int
	}{
		{"server error, then created", serverErr, 3, false, 4},
		{"server error for good", serverErr, 1000, true, ensureMaxUnanswered},
		{"access denied", denied, 1000, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out syncBuf
				db := &createFailsDB{fail: tc.fail, err: tc.err}
				tbl := newTable(TableConfig{Name: "leases", Client: db}, slog.New(slog.NewJSONHandler(&out, nil)))
				err := tbl.Ensure(t.Context())
				if (err != nil) != tc.wantErr {
					t.Fatalf("Ensure: %v, want an error: %v", err, tc.wantErr)
				}
				if db.creates != tc.creates {
					t.Errorf("%d CreateTable calls, want %d", db.creates, tc.creates)
				}
				if tc.err == serverErr && !strings.Contains(out.tail(20), "CreateTable") {
					t.Errorf("no warning naming CreateTable:\n%s", out.tail(20))
				}
			})
		})
	}
}

// TestEnsureRefusedNamesFix checks that a DescribeTable or CreateTable of
// the lease table that DynamoDB refuses for good (access denied, bad
// credentials) fails Ensure with an error naming the table and the fix,
// not the bare error of the call.
func TestEnsureRefusedNamesFix(t *testing.T) {
	refused := func(op, code string) error {
		return fmt.Errorf("operation error DynamoDB: %s: %w", op,
			&smithy.GenericAPIError{Code: code, Message: "refused", Fault: smithy.FaultClient})
	}
	for _, tc := range []struct {
		name string
		db   leasetable.DynamoDBAPI
		want string
	}{
		{"DescribeTable denied", &silentThenActiveDB{silent: 1000, fail: refused("DescribeTable", "AccessDeniedException")}, "dynamodb:DescribeTable"},
		{"CreateTable denied", &createFailsDB{fail: 1000, err: refused("CreateTable", "AccessDeniedException")}, "dynamodb:CreateTable"},
		{"bad credentials", &silentThenActiveDB{silent: 1000, fail: refused("DescribeTable", "UnrecognizedClientException")}, "credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tbl := newTable(TableConfig{Name: "leases", Client: tc.db}, slog.New(slog.DiscardHandler))
				err := tbl.Ensure(t.Context())
				if err == nil || !strings.Contains(err.Error(), "leases") || !strings.Contains(err.Error(), "fix:") || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Ensure: %v, want an error naming the table and the fix (%s)", err, tc.want)
				}
			})
		})
	}
}
