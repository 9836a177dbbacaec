// Package dynamosafe wraps a DynamoDB client weir was given (a user's
// *dynamodb.Client, or a wrapper of it for metrics or tests) so that a
// panic in it is returned as the call's error: the lease table, the
// per-shard state store and the DynamoDB recovery log call their client
// from goroutines of weir's own, where a panic crashed the process. See
// DESIGN.md, Failure model.
package dynamosafe

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/weirstream/weir/internal/panics"
)

// Client calls the methods of the client it wraps that its user's
// interface names, and returns a panic in one as the call's error, naming
// the method, the panic, where it was raised and its stack. It implements
// every DynamoDB method weir calls; one the wrapped client lacks fails
// with an error (the interfaces its users take make sure it has those they
// call).
type Client struct{ c any }

// Wrap returns c wrapped.
func Wrap(c any) Client { return Client{c: c} }

// call runs f with the wrapped client as a C, the interface of method op.
func call[C, R any](c any, op string, f func(C) (R, error)) (R, error) {
	cc, ok := c.(C)
	if !ok {
		var zero R
		return zero, fmt.Errorf("the DynamoDB client %T has no %s method", c, op)
	}
	r, err := panics.Call1(func() (R, error) { return f(cc) })
	if pe, ok := err.(*panics.Error); ok {
		err = &panicError{op: op, pe: pe}
	}
	return r, err
}

// panicError is a panic of the client in method op. It is a
// smithy.APIError of the client's fault, so that weir's retry loops
// (internal/awserr.Refused) take it for what it is: a failure no retry
// changes, returned at once rather than tried again forever.
type panicError struct {
	op string
	pe *panics.Error
}

func (e *panicError) Error() string {
	return fmt.Sprintf("the DynamoDB client panicked in %s: %v, in %s\n%s", e.op, e.pe, e.pe.Site, e.pe.Stack)
}

func (e *panicError) Unwrap() error { return e.pe }

// ErrorCode implements smithy.APIError.
func (e *panicError) ErrorCode() string { return "WeirClientPanic" }

// ErrorMessage implements smithy.APIError.
func (e *panicError) ErrorMessage() string { return e.Error() }

// ErrorFault implements smithy.APIError: the client's.
func (e *panicError) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

type (
	opt     = func(*dynamodb.Options)
	getItem interface {
		GetItem(context.Context, *dynamodb.GetItemInput, ...opt) (*dynamodb.GetItemOutput, error)
	}
	putItem interface {
		PutItem(context.Context, *dynamodb.PutItemInput, ...opt) (*dynamodb.PutItemOutput, error)
	}
	updateItem interface {
		UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...opt) (*dynamodb.UpdateItemOutput, error)
	}
	deleteItem interface {
		DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...opt) (*dynamodb.DeleteItemOutput, error)
	}
	batchWriteItem interface {
		BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...opt) (*dynamodb.BatchWriteItemOutput, error)
	}
	query interface {
		Query(context.Context, *dynamodb.QueryInput, ...opt) (*dynamodb.QueryOutput, error)
	}
	scan interface {
		Scan(context.Context, *dynamodb.ScanInput, ...opt) (*dynamodb.ScanOutput, error)
	}
	createTable interface {
		CreateTable(context.Context, *dynamodb.CreateTableInput, ...opt) (*dynamodb.CreateTableOutput, error)
	}
	describeTable interface {
		DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...opt) (*dynamodb.DescribeTableOutput, error)
	}
)

// GetItem calls the wrapped client's GetItem.
func (s Client) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...opt) (*dynamodb.GetItemOutput, error) {
	return call(s.c, "GetItem", func(c getItem) (*dynamodb.GetItemOutput, error) { return c.GetItem(ctx, in, o...) })
}

// PutItem calls the wrapped client's PutItem.
func (s Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...opt) (*dynamodb.PutItemOutput, error) {
	return call(s.c, "PutItem", func(c putItem) (*dynamodb.PutItemOutput, error) { return c.PutItem(ctx, in, o...) })
}

// UpdateItem calls the wrapped client's UpdateItem.
func (s Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...opt) (*dynamodb.UpdateItemOutput, error) {
	return call(s.c, "UpdateItem", func(c updateItem) (*dynamodb.UpdateItemOutput, error) { return c.UpdateItem(ctx, in, o...) })
}

// DeleteItem calls the wrapped client's DeleteItem.
func (s Client) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...opt) (*dynamodb.DeleteItemOutput, error) {
	return call(s.c, "DeleteItem", func(c deleteItem) (*dynamodb.DeleteItemOutput, error) { return c.DeleteItem(ctx, in, o...) })
}

// BatchWriteItem calls the wrapped client's BatchWriteItem.
func (s Client) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...opt) (*dynamodb.BatchWriteItemOutput, error) {
	return call(s.c, "BatchWriteItem", func(c batchWriteItem) (*dynamodb.BatchWriteItemOutput, error) { return c.BatchWriteItem(ctx, in, o...) })
}

// Query calls the wrapped client's Query.
func (s Client) Query(ctx context.Context, in *dynamodb.QueryInput, o ...opt) (*dynamodb.QueryOutput, error) {
	return call(s.c, "Query", func(c query) (*dynamodb.QueryOutput, error) { return c.Query(ctx, in, o...) })
}

// Scan calls the wrapped client's Scan.
func (s Client) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...opt) (*dynamodb.ScanOutput, error) {
	return call(s.c, "Scan", func(c scan) (*dynamodb.ScanOutput, error) { return c.Scan(ctx, in, o...) })
}

// CreateTable calls the wrapped client's CreateTable.
func (s Client) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...opt) (*dynamodb.CreateTableOutput, error) {
	return call(s.c, "CreateTable", func(c createTable) (*dynamodb.CreateTableOutput, error) { return c.CreateTable(ctx, in, o...) })
}

// DescribeTable calls the wrapped client's DescribeTable.
func (s Client) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...opt) (*dynamodb.DescribeTableOutput, error) {
	return call(s.c, "DescribeTable", func(c describeTable) (*dynamodb.DescribeTableOutput, error) { return c.DescribeTable(ctx, in, o...) })
}
