package letterstest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/internal/localaws"
)

// CreateTable creates a dead-letter table of sink/deadletter/dynamodb on c
// (partition key "batch", a string; sort key "index", a number), named
// after tb, and returns its name.
func CreateTable(tb testing.TB, c *ddb.Client) string {
	tb.Helper()
	name := localaws.UniqueName(tb)
	_, err := c.CreateTable(tb.Context(), &ddb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("batch"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("index"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("batch"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("index"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return name
}
