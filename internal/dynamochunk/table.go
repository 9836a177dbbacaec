package dynamochunk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/weirstream/weir/clock"
	"github.com/weirstream/weir/internal/backoff"
	"github.com/weirstream/weir/internal/dynamotable"
)

// TableClient is the part of *dynamodb.Client EnsureTable uses.
type TableClient interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// ErrTableKey is wrapped by the error EnsureTable returns for a table whose
// key is not (hash, sort).
var ErrTableKey = errors.New("table key")

// tableWait paces the checks of a table being created.
var tableWait = backoff.Policy{Base: 20 * time.Millisecond, Max: 2 * time.Second}

// EnsureTable creates table, on demand (PAY_PER_REQUEST), with partition
// key hash (string) and sort key sort (number) if it does not exist,
// waits until it is ACTIVE or UPDATING, which serves reads and writes too
// (backing off on clk, as dynamotable.Wait bounds and warns to log: a
// status no wait cures, such as ARCHIVED, fails at once naming the fix),
// and checks its key, names and types: a table of another key is an error
// wrapping ErrTableKey. what names the table's use in warnings and errors
// ("recovery log table"). opts are the per-call options of each call (an
// attempt timeout).
func EnsureTable(ctx context.Context, c TableClient, clk clock.Clock, log *slog.Logger, table, hash, sort, what string, opts ...func(*dynamodb.Options)) error {
	created := false
	wait := tableWait.Start()
	tw := dynamotable.Wait{Table: table, Prefix: what, Logger: log}
	for {
		out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, opts...)
		var nf *types.ResourceNotFoundException
		switch {
		case errors.As(err, &nf) && !created:
			if err := createTable(ctx, c, table, hash, sort, opts); err != nil {
				return err
			}
			created = true
			continue
		case errors.As(err, &nf):
			// Created but not visible yet.
			if _, err := tw.Check(dynamotable.Missing, clk.Now()); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("describe table %s: %w", table, err)
		case out.Table == nil:
			return fmt.Errorf("describe table %s: %w", table, dynamotable.ErrNoDescription)
		default:
			// ACTIVE, or UPDATING (capacity or billing mode changed, an
			// index built: minutes to an hour), serves reads and writes.
			usable, err := tw.Check(out.Table.TableStatus, clk.Now())
			switch {
			case err != nil:
				return err
			case usable:
				return checkKey(table, out.Table, hash, sort, what)
			}
		}
		if err := wait.Wait(ctx, clk); err != nil {
			return err
		}
	}
}

func createTable(ctx context.Context, c TableClient, table, hash, sort string, opts []func(*dynamodb.Options)) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(hash), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(sort), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sort), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	}, opts...)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	return nil
}

// checkKey refuses a table whose key is not (hash, sort), of types string
// and number: every write of another would be refused.
func checkKey(table string, desc *types.TableDescription, hash, sort, what string) error {
	var h, s string
	for _, k := range desc.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			h = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			s = aws.ToString(k.AttributeName)
		}
	}
	if h != hash || s != sort {
		return fmt.Errorf("%w: table %s has key (%q, %q); a %s needs partition key %q "+
			"(string) and sort key %q (number): use another table name", ErrTableKey, table, h, s, what, hash, sort)
	}
	want := map[string]types.ScalarAttributeType{hash: types.ScalarAttributeTypeS, sort: types.ScalarAttributeTypeN}
	for _, d := range desc.AttributeDefinitions {
		name := aws.ToString(d.AttributeName)
		if w, ok := want[name]; ok && d.AttributeType != w {
			role := "partition key"
			if name == sort {
				role = "sort key"
			}
			return fmt.Errorf("%w: table %s has %s %q of type %s; a %s needs partition key %q "+
				"(string) and sort key %q (number): use another table name", ErrTableKey, table, role, name, d.AttributeType, what, hash, sort)
		}
	}
	return nil
}
