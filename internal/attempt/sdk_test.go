package attempt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/attempt"
	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/internal/localaws/faults"
)

// TestMiddlewareRetriesASilentAttempt checks, against dynalite, that the
// SDK's standard retryer retries an attempt Middleware abandoned, and that
// without retries the error says it timed out.
func TestMiddlewareRetriesASilentAttempt(t *testing.T) {
	t.Parallel()
	env := localaws.ForTest(t, localaws.Options{DynamoDB: true})
	ctx := t.Context()
	table := localaws.UniqueName(t)
	if _, err := env.DynamoDB().CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	put := &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}}
	timeout := func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, attempt.Middleware(clock.Real{}, 50*time.Millisecond))
	}

	tr, err := faults.New(faults.Config{Rules: []faults.Rule{{Operation: "PutItem", Kind: faults.Hang, Times: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	db := env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = tr })
	if _, err := db.PutItem(ctx, put, timeout); err != nil {
		t.Fatalf("PutItem with one silent attempt: %v", err)
	}
	if got := [2]int{tr.Injected("PutItem", faults.Hang), tr.Requests("PutItem")}; got != [2]int{1, 2} {
		t.Errorf("[hangs, requests] = %v, want [1 2]", got)
	}

	if err := tr.SetRules(faults.Rule{Operation: "PutItem", Kind: faults.Hang, Times: 1}); err != nil {
		t.Fatal(err)
	}
	noRetry := env.DynamoDB(func(o *dynamodb.Options) { o.HTTPClient = tr; o.Retryer = aws.NopRetryer{} })
	if _, err := noRetry.PutItem(ctx, put, timeout); !errors.Is(err, attempt.ErrTimeout) {
		t.Errorf("PutItem without retries: got %v, want ErrTimeout", err)
	}
}
