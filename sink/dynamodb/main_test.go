package dynamodb_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/internal/localaws"
	"github.com/weirstream/weir/sink/dynamodb"
)

var servers = localaws.NewShared(localaws.Options{DynamoDB: true, Kinesis: true})

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// setup returns a client of the shared dynalite, a new table on it (see
// createTable) and the test's context.
func setup(t *testing.T) (*ddb.Client, string, context.Context) {
	t.Helper()
	c := servers.Env(t).DynamoDB()
	return c, createTable(t, c), t.Context()
}

// createTable creates a table of partition key "id" (string) on c and
// returns its name once it is ACTIVE: dynalite answers a write to a table
// still CREATING (for a moment even with createTableMs 0, longer on a
// loaded machine) with ResourceNotFoundException.
func createTable(tb testing.TB, c *ddb.Client) string {
	tb.Helper()
	name := localaws.UniqueName(tb)
	_, err := c.CreateTable(tb.Context(), &ddb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		tb.Fatal(err)
	}
	active := ddb.NewTableExistsWaiter(c, func(o *ddb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 5*time.Millisecond, 100*time.Millisecond
	})
	if err := active.Wait(tb.Context(), &ddb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		tb.Fatal(err)
	}
	return name
}

// event is a test record: an update of item ID (add 1 to hits, set last to
// N), or with Put a put of the item {id, n: N}.
type event struct {
	ID  string
	N   int
	Put bool
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: strconv.Itoa(n)} }

// toWrite maps an event to its Write.
func toWrite(e event) (dynamodb.Write, error) {
	if e.Put {
		return dynamodb.Write{Item: map[string]types.AttributeValue{"id": str(e.ID), "n": num(e.N)}}, nil
	}
	return dynamodb.Write{
		Key:    map[string]types.AttributeValue{"id": str(e.ID)},
		Update: "ADD hits :one SET #last = :n",
		Names:  map[string]string{"#last": "last"},
		Values: map[string]types.AttributeValue{":one": num(1), ":n": num(e.N)},
	}, nil
}

// apply returns the table that applying events in order, once each, makes,
// as scan returns it (without versions).
func apply(table map[string]map[string]string, events ...event) map[string]map[string]string {
	if table == nil {
		table = map[string]map[string]string{}
	}
	for _, e := range events {
		if e.Put {
			table[e.ID] = map[string]string{"n": strconv.Itoa(e.N)}
			continue
		}
		it := table[e.ID]
		if it == nil {
			it = map[string]string{}
			table[e.ID] = it
		}
		hits, _ := strconv.Atoi(it["hits"])
		it["hits"] = strconv.Itoa(hits + 1)
		it["last"] = strconv.Itoa(e.N)
	}
	return table
}

// scan returns every item of the table, by id, its attributes formatted,
// without the id and the version attribute.
func scan(tb testing.TB, c *ddb.Client, table string) map[string]map[string]string {
	tb.Helper()
	items := map[string]map[string]string{}
	in := &ddb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := c.Scan(tb.Context(), in)
		if err != nil {
			tb.Fatal(err)
		}
		for _, it := range out.Items {
			m := map[string]string{}
			for a, v := range it {
				if a == "id" || a == dynamodb.DefaultVersionAttribute {
					continue
				}
				m[a] = format(v)
			}
			items[it["id"].(*types.AttributeValueMemberS).Value] = m
		}
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func format(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	}
	return fmt.Sprintf("%T", v)
}

// versions returns the version attribute of every item, by id.
func versions(tb testing.TB, c *ddb.Client, table string) map[string]string {
	tb.Helper()
	out, err := c.Scan(tb.Context(), &ddb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		tb.Fatal(err)
	}
	vs := map[string]string{}
	for _, it := range out.Items {
		vs[it["id"].(*types.AttributeValueMemberS).Value] = format(it[dynamodb.DefaultVersionAttribute])
	}
	return vs
}

// events returns n events over keys items, the i-th of item i%keys,
// every third one a put when puts is set.
func events(n, keys int, puts bool) []event {
	es := make([]event, n)
	for i := range es {
		es[i] = event{ID: "item-" + strconv.Itoa(i%keys), N: i, Put: puts && i%3 == 2}
	}
	return es
}

// newSink returns a Sink of events writing to table through c.
func newSink(tb testing.TB, ctx context.Context, cfg dynamodb.Config) *dynamodb.Sink[event] {
	tb.Helper()
	s, err := dynamodb.New(ctx, cfg, toWrite)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
