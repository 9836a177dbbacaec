package kinesis

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/checkpoint/leasetable"
	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/localaws/faults"
	"github.com/weirstream/weir/source"
)

// TestStateTableSilentDynamoDB checks, on a manual clock, that the start-up
// check of the shard state table, on a DynamoDB that accepts connections
// and never answers (a faults.Proxy in Blackhole mode), times out each
// attempt after the lease table's AttemptTimeout, warns at once naming the
// endpoint and the fix, and fails after 10 unanswered calls naming the fix.
// Before, it waited for an answer for ever, and the receiver with it.
func TestStateTableSilentDynamoDB(t *testing.T) {
	endpoint := faults.Silent(t)
	db := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:     aws.NopRetryer{}, // one attempt a call
	})
	clk := clock.NewManual(time.Unix(0, 0))
	var logs bytes.Buffer // written by ensureTable only, read once it returned
	lr := &leaseRun{rn: &run{clock: clk}, log: slog.New(slog.NewJSONHandler(&logs, nil)),
		cfg: leasetable.Config{TableName: "leases", AttemptTimeout: time.Second}}
	sr, err := newStateRun(struct{ source.ShardState }{}, db, "leases", "app", lr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// advancing ends when ensureTable returns; its deadline is a guard, not
	// a measure: before the fix, nothing ever waited on the clock.
	advancing, stopAdvancing := context.WithTimeout(t.Context(), 30*time.Second)
	defer stopAdvancing()
	done := make(chan error, 1)
	go func() {
		err := sr.ensureTable(ctx, lr)
		stopAdvancing()
		done <- err
	}()
	for waits := 0; clk.WaitForWaiters(advancing, 1) == nil; waits++ {
		if waits == 100 {
			break
		}
		clk.Advance(time.Second)
	}
	if advancing.Err() != context.Canceled { // not returned
		cancel()
		t.Fatalf("ensureTable on a silent DynamoDB still waiting (%v): %v", advancing.Err(), <-done)
	}
	got := <-done
	if got == nil {
		t.Fatal("ensureTable on a silent DynamoDB succeeded")
	}
	if !strings.Contains(got.Error(), "answered none of 10") || !strings.Contains(got.Error(), "fix:") || !strings.Contains(got.Error(), endpoint) {
		t.Errorf("ensureTable = %v; want an error saying DynamoDB answered none of 10 calls, naming the endpoint and the fix", got)
	}
	var warned bool
	for line := range strings.Lines(logs.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == "WARN" && m["endpoint"] == endpoint && m["table"] == "leases-state" && strings.Contains(m["fix"].(string), "Leases.Endpoint") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no WARN naming the endpoint, the table and the fix; logs:\n%s", logs.String())
	}
}

// failingStateDB is a DynamoDB whose shard state table exists, ACTIVE,
// and whose first `fail` DescribeTable calls fail with err. Only
// ensureTable's retries are tested with it; the calls themselves are
// tested against dynalite.
type failingStateDB struct {
	*dynamodb.Client // of no server: any other call fails
	fail             int
	err              error
	calls            int
}

func (d *failingStateDB) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if d.calls++; d.calls <= d.fail {
		return nil, d.err
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{
		TableName: in.TableName, TableStatus: types.TableStatusActive,
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("log"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("seq"), KeyType: types.KeyTypeRange},
		},
	}}, nil
}

// TestStateTableRidesOutFailedCalls checks, in virtual time, that the
// start-up check of the shard state table tries a DescribeTable again
// after a failure a retry may heal (a server error past the client's
// retries, a refused connection), backing off and warning, within the
// bound of unanswered calls, as the lease table's check does, rather than
// failing the receiver at once; and that one DynamoDB refuses for good
// still fails it at once, an access denied naming the action to allow.
func TestStateTableRidesOutFailedCalls(t *testing.T) {
	serverErr := &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "DescribeTable",
		Err: &smithy.GenericAPIError{Code: "InternalServerError", Message: "internal failure", Fault: smithy.FaultServer}}
	denied := &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "DescribeTable",
		Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not allowed", Fault: smithy.FaultClient}}
	for _, tc := range []struct {
		name    string
		err     error
		fail    int
		wantErr bool
		calls   int
	}{
		{"server error, then answered", serverErr, 3, false, 4},
		{"server error for good", serverErr, 1000, true, stateEnsureMaxUnanswered},
		{"access denied", denied, 1000, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				db := &failingStateDB{Client: dynamodb.New(dynamodb.Options{Region: "us-east-1"}), fail: tc.fail, err: tc.err}
				lr := &leaseRun{rn: &run{clock: clock.Real{}}, log: slog.New(slog.NewTextHandler(&logs, nil)),
					cfg: leasetable.Config{TableName: "leases"}}
				sr, err := newStateRun(struct{ source.ShardState }{}, db, "leases", "app", lr)
				if err != nil {
					t.Fatal(err)
				}
				err = sr.ensureTable(t.Context(), lr)
				if (err != nil) != tc.wantErr {
					t.Fatalf("ensureTable: %v, want an error: %v", err, tc.wantErr)
				}
				if db.calls != tc.calls {
					t.Errorf("%d DescribeTable calls, want %d", db.calls, tc.calls)
				}
				if tc.err == denied && (err == nil || !strings.Contains(err.Error(), "fix: allow dynamodb:DescribeTable on table leases-state")) {
					t.Errorf("ensureTable: %v, want an error naming the action to allow on the table", err)
				}
				if tc.err == serverErr && !strings.Contains(logs.String(), "level=WARN") {
					t.Errorf("no warning:\n%s", logs.String())
				}
			})
		})
	}
}
