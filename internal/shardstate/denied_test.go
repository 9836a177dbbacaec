package shardstate

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/clock"
)

// deniedClient is a DynamoDB that denies every call for want of an IAM
// permission, with the error shape the SDK gives (AccessDeniedException is
// not in DynamoDB's API model: a generic API error of that code, in the
// call's operation error).
type deniedClient struct{}

func denied(op string) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op,
		Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User: w is not authorized to perform: dynamodb:" + op, Fault: smithy.FaultClient}}
}

func (deniedClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, denied("GetItem")
}

func (deniedClient) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, denied("PutItem")
}

func (deniedClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, denied("UpdateItem")
}

func (deniedClient) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return nil, denied("BatchWriteItem")
}

func (deniedClient) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return nil, denied("DescribeTable")
}

func (deniedClient) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return nil, denied("CreateTable")
}

// TestDynamoAccessDenied checks that a call on the shard state table that
// DynamoDB denies for want of an IAM permission fails naming the table,
// the action to allow and the policy that lists the table's actions, as
// the recovery log's and the lease table's errors do: the table's check
// at start-up (EnsureTable), a claim, a put and a get.
func TestDynamoAccessDenied(t *testing.T) {
	d, err := NewDynamo(DynamoConfig{Client: deniedClient{}, Table: "leases-state"})
	if err != nil {
		t.Fatal(err)
	}
	key := Key{Application: "app", Stream: "s", Shard: "shardId-000000000000", Shape: "v1"}
	lease := Lease{Counter: 1, Owner: "w"}
	for _, tc := range []struct {
		name, action string
		call         func(ctx context.Context) error
	}{
		{"ensure table", "DescribeTable", func(ctx context.Context) error {
			return EnsureTable(ctx, deniedClient{}, clock.Real{}, slog.Default(), "leases-state")
		}},
		{"claim", "UpdateItem", func(ctx context.Context) error { return d.Claim(ctx, key, lease) }},
		{"put", "UpdateItem", func(ctx context.Context) error {
			return d.Put(ctx, key, Snapshot{Data: []byte("x"), Position: Position{Sequence: "1"}, Lease: lease})
		}},
		{"get", "GetItem", func(ctx context.Context) error { _, err := d.Get(ctx, key); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(t.Context())
			for _, want := range []string{"AccessDeniedException", "fix: allow dynamodb:" + tc.action + " on table leases-state", "docs/iam/dynamodb-shardstate.json"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one naming %q", err, want)
				}
			}
		})
	}
}

// panickingClient is a client whose GetItem panics, as a user's wrapper
// with a bug may.
type panickingClient struct{ deniedClient }

func (panickingClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	panic("wrapper bug")
}

// TestDynamoClientPanic checks that a client that panics fails the call
// with an error naming it, rather than crashing the process from the
// store's goroutines.
func TestDynamoClientPanic(t *testing.T) {
	d, err := NewDynamo(DynamoConfig{Client: panickingClient{}, Table: "leases-state"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Get(t.Context(), Key{Application: "app", Stream: "s", Shard: "shardId-0"})
	if err == nil || !strings.Contains(err.Error(), "the DynamoDB client panicked in GetItem: panic: wrapper bug") {
		t.Errorf("Get = %v, want the client's panic as its error", err)
	}
}
