package localaws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/google/go-cmp/cmp"
)

// TestStartAll starts all three servers and exercises each.
func TestStartAll(t *testing.T) {
	t.Parallel()
	began := time.Now()
	env := ForTest(t, Options{Kinesis: true, DynamoDB: true, KinesisMock: true})
	t.Logf("kinesalite, dynalite and kinesis-mock ready in %v", time.Since(began))
	ctx := t.Context()

	t.Run("kinesalite", func(t *testing.T) {
		t.Parallel()
		roundTrip(ctx, t, env.Kinesis(), 1234, 3)
	})
	t.Run("kinesis-mock", func(t *testing.T) {
		t.Parallel()
		roundTrip(ctx, t, env.KinesisMock(), 20, 2)
	})
	t.Run("kinesis-mock SubscribeToShard", func(t *testing.T) {
		t.Parallel()
		subscribe(ctx, t, env.KinesisMock())
	})
	t.Run("dynalite", func(t *testing.T) {
		t.Parallel()
		conditionalWrite(ctx, t, env.DynamoDB())
	})
}

// subscribe reads records through an enhanced fan-out consumer.
func subscribe(ctx context.Context, t *testing.T, c *kinesis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	name := "subscribe" // each test has servers of its own: a fixed name is free
	want := []string{"a", "b", "c"}
	err := errors.Join(
		CreateStreamOn(ctx, c, name, 1),
		PutRecordsOn(ctx, c, name, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, func(int) string { return "k" }),
	)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
		StreamARN: sum.StreamDescriptionSummary.StreamARN, ConsumerName: aws.String("efo"),
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{
		ConsumerARN: reg.Consumer.ConsumerARN, ShardId: aws.String("shardId-000000000000"),
		StartingPosition: &ktypes.StartingPosition{Type: ktypes.ShardIteratorTypeTrimHorizon},
	})
	if err != nil {
		t.Fatal(err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var got []string
	for ev := range stream.Events() {
		if e, ok := ev.(*ktypes.SubscribeToShardEventStreamMemberSubscribeToShardEvent); ok {
			for _, r := range e.Value.Records {
				got = append(got, string(r.Data))
			}
		}
		if len(got) >= len(want) {
			break
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records from SubscribeToShard (-want +got):\n%s (stream error: %v)", diff, stream.Err())
	}
}

// roundTrip creates a stream, puts n records and reads them all back.
func roundTrip(ctx context.Context, t *testing.T, c *kinesis.Client, n, shards int) {
	t.Helper()
	name := "round-trip" // each test has servers of its own: a fixed name is free
	if err := CreateStreamOn(ctx, c, name, shards); err != nil {
		t.Fatal(err)
	}
	var want []string
	records := make([][]byte, n)
	for i := range records {
		records[i] = fmt.Appendf(nil, "record-%05d", i)
		want = append(want, string(records[i]))
	}
	if err := PutRecordsOn(ctx, c, name, records, nil); err != nil {
		t.Fatal(err)
	}
	got := readAll(ctx, t, c, name)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records read back (-want +got):\n%s", diff)
	}
}

// readAll reads every record of every shard of stream from TRIM_HORIZON.
func readAll(ctx context.Context, t *testing.T, c *kinesis.Client, stream string) []string {
	t.Helper()
	shards, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sh := range shards.Shards {
		it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
			StreamName: aws.String(stream), ShardId: sh.ShardId, ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Records {
				got = append(got, string(r.Data))
			}
			if len(out.Records) == 0 || aws.ToInt64(out.MillisBehindLatest) == 0 && len(out.Records) < 1000 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return got
}

// conditionalWrite creates a table and checks that a conditional put on an
// existing key fails with the typed error.
func conditionalWrite(ctx context.Context, t *testing.T, c *dynamodb.Client) {
	t.Helper()
	table := "conditional-write"
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: dtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	put := func() error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:           aws.String(table),
			Item:                map[string]dtypes.AttributeValue{"k": &dtypes.AttributeValueMemberS{Value: "lease"}},
			ConditionExpression: aws.String("attribute_not_exists(k)"),
		})
		return err
	}
	if err := put(); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	var ccf *dtypes.ConditionalCheckFailedException
	if err := put(); !errors.As(err, &ccf) {
		t.Fatalf("second conditional put: got %v, want *types.ConditionalCheckFailedException", err)
	}
}

// TestEnvironmentEndpoints checks that endpoints given by variables are used
// as they are: nothing is installed or started.
func TestEnvironmentEndpoints(t *testing.T) {
	t.Parallel()
	real := ForTest(t, Options{Kinesis: true, DynamoDB: true})
	vars := map[string]string{
		EnvKinesisEndpoint:  real.KinesisEndpoint + "/",
		EnvDynamoDBEndpoint: real.DynamoDBEndpoint,
		EnvDir:              "/nonexistent/so/any/install/would/fail",
	}
	env, err := start(t.Context(), Options{Kinesis: true, DynamoDB: true}, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	got := []any{env.KinesisEndpoint, env.DynamoDBEndpoint, len(env.procs)}
	want := []any{real.KinesisEndpoint, real.DynamoDBEndpoint, 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("endpoints and started processes (-want +got):\n%s", diff)
	}
	name := "from-environment"
	if err := env.CreateStream(t.Context(), name, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := real.Kinesis().DescribeStreamSummary(t.Context(),
		&kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)}); err != nil {
		t.Errorf("stream made through the variable's endpoint is not on the server: %v", err)
	}
	if _, err := env.DynamoDB().ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("DynamoDB through the variable's endpoint: %v", err)
	}
}

// TestClientOfServerNotStarted checks that a client of a server not asked for
// fails without sending anything.
func TestClientOfServerNotStarted(t *testing.T) {
	t.Parallel()
	env := &Env{}
	_, err := env.Kinesis().ListStreams(t.Context(), &kinesis.ListStreamsInput{})
	if !errors.Is(err, errNotStarted) {
		t.Errorf("ListStreams on a zero Env: got %v, want errNotStarted", err)
	}
	_, err = env.DynamoDB().ListTables(t.Context(), &dynamodb.ListTablesInput{})
	if !errors.Is(err, errNotStarted) {
		t.Errorf("ListTables on a zero Env: got %v, want errNotStarted", err)
	}
}

// TestPersistence restarts kinesalite and dynalite on the same DataDir.
func TestPersistence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Kinesis: true, DynamoDB: true, DataDir: dir}
	first, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	name := "persisted"
	err = errors.Join(
		first.CreateStream(t.Context(), name, 1),
		first.PutRecords(t.Context(), name, [][]byte{[]byte("kept")}, nil),
	)
	if err := errors.Join(err, first.Close()); err != nil {
		t.Fatal(err)
	}
	second := ForTest(t, opts)
	if diff := cmp.Diff([]string{"kept"}, readAll(t.Context(), t, second.Kinesis(), name)); diff != "" {
		t.Errorf("records after restart (-want +got):\n%s", diff)
	}
}
