package dynamodb_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/batch"
	"github.com/weirstream/weir/localaws"
	"github.com/weirstream/weir/sink/dynamodb"
)

// A Sink counts words in a table (here a local dynalite stands in for
// DynamoDB): each word adds 1 to its item's count. Writing a batch again,
// as a pipeline does when it runs a batch a crash interrupted, counts
// nothing twice.
func Example() {
	ctx := context.Background()
	env, err := localaws.Start(ctx, localaws.Options{DynamoDB: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	client := env.DynamoDB() // on AWS: leave Client nil, or set AWS and Endpoint
	if _, err := client.CreateTable(ctx, &ddb.CreateTableInput{
		TableName:            aws.String("counts"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("word"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("word"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		fmt.Println(err)
		return
	}

	sink, err := dynamodb.New(ctx, dynamodb.Config{Client: client, Table: "counts"}, func(word string) (dynamodb.Write, error) {
		return dynamodb.Write{
			Key:    map[string]types.AttributeValue{"word": &types.AttributeValueMemberS{Value: word}},
			Update: "ADD hits :one",
			Values: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a pipeline: stream.ForEachBatch(words, sink.Write, stream.Named("counts")).
	for _, b := range []*batch.Batch[string]{
		batch.New(1700000000000, nil, []string{"to", "be", "or", "not", "to", "be"}),
		batch.New(1700000000000, nil, []string{"to", "be", "or", "not", "to", "be"}), // run again
	} {
		if err := sink.Write(ctx, b); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, w := range []string{"to", "be", "or"} {
		out, err := client.GetItem(ctx, &ddb.GetItemInput{
			TableName: aws.String("counts"), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"word": &types.AttributeValueMemberS{Value: w}},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(w, out.Item["hits"].(*types.AttributeValueMemberN).Value)
	}
	fmt.Printf("%+v\n", sink.Stats())
	// Output:
	// to 2
	// be 2
	// or 1
	// {Written:6 Skipped:6 Retried:0}
}
